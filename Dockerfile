# One image for every Hades role: `docker run IMAGE api|scheduler|notifier|executor|operator|up|streams apply`.
# compose.yml and the Helm chart (helm/hades) run each role from it. kubernetes-asyncio (the k8s executor and the
# BuildJob operator) is a plain dependency, so the same image serves Docker and Kubernetes.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md streams.yaml ./
COPY hades ./hades
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN groupadd --system --gid 10001 hades \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/hades --create-home hades
# Numeric, so Kubernetes can check runAsNonRoot without a runAsUser of its own.
USER 10001:10001
WORKDIR /var/lib/hades
# Bytecode was compiled at install: nothing is written next to the code, so the root filesystem can be read-only.
ENV HADES_DATA_DIR=/var/lib/hades API_HOST=0.0.0.0 API_PORT=8080 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 8080 the API, 8081 the Log Manager alone or the operator's health probes, 9090 /metrics of the other roles
EXPOSE 8080 8081 9090
ENTRYPOINT ["hades"]
CMD ["up"]
