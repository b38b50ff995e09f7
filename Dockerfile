# One image for every Hades role: `docker run IMAGE hades api|scheduler|executor|up|streams apply`.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md streams.yaml ./
COPY hades ./hades
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --system --uid 10001 --home-dir /var/lib/hades --create-home hades
USER hades
WORKDIR /var/lib/hades
ENV HADES_DATA_DIR=/var/lib/hades API_HOST=0.0.0.0 API_PORT=8080
EXPOSE 8080
ENTRYPOINT ["hades"]
CMD ["up"]
