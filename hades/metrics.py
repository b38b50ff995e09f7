"""The metrics one process measures itself (not folded from the log): event append latency, executor slots and
attempts, in one registry per process handed in by ``runtime`` (never prometheus-client's import-time default).

The API's ``/metrics`` renders this registry next to the read models' families; a process without the API role
serves it alone on ``METRICS_PORT``. Label values come from fixed sets (event type tags, slot states, statuses).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

log = logging.getLogger(__name__)

#: An append is a NATS round trip (~0.2 ms here); the buckets reach far enough to see a struggling server.
APPEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class ProcessMetrics:
    """The process-local families, registered in ``registry``."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        self.append_seconds = Histogram(
            "hades_event_append_seconds",
            "Time for this process's event appends to be acknowledged (or refused), by the first event's type.",
            ["kind"],
            buckets=APPEND_BUCKETS,
            registry=self.registry,
        )
        self.attempts_started = Counter(
            "hades_executor_attempts_started",
            "Attempts this executor process started.",
            registry=self.registry,
        )
        self.attempts_finished = Counter(
            "hades_executor_attempts_finished",
            "Attempts this executor process saw to their end, by the job's status then.",
            ["status"],
            registry=self.registry,
        )
        self._slots = Gauge(
            "hades_executor_slots",
            "This executor process's job slots (CONCURRENCY; an operator's MAX_PARALLELISM while it leads), busy "
            "or free.",
            ["state"],
            registry=self.registry,
        )

    def executor_slots(self, total: Callable[[], int], busy: Callable[[], int]) -> None:
        """Report ``total()`` slots, ``busy()`` of them taken, both read at scrape time (an operator replica has
        slots only while it leads)."""
        self._slots.labels("busy").set_function(busy)
        self._slots.labels("free").set_function(lambda: total() - busy())


class MetricsServer:
    """``/metrics`` of a process without the API role, on its own port (a daemon thread, as prometheus-client
    serves it), and ``/health``: 503 while the process cannot reach NATS (its readiness, as the API's
    ``/health``); anything else answers the metrics, as prometheus-client's own server does."""

    def __init__(self, server: WSGIServer) -> None:
        self._server = server

    @property
    def port(self) -> int:
        """Where it listens."""
        return int(self._server.server_address[1])

    @classmethod
    def start(
        cls, registry: CollectorRegistry, host: str, port: int, connected: Callable[[], bool] = lambda: True
    ) -> MetricsServer | None:
        """Serve ``registry``, and ``connected()`` (read on each ``/health``); None, with a warning, when the port
        is taken (metrics never stop a role)."""
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != "/health":
                answer: Iterable[bytes] = metrics(environ, start_response)
                return answer
            ok = connected()
            body = _HEALTHY if ok else _UNHEALTHY
            status = "200 OK" if ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]

        class Server(ThreadingWSGIServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        try:
            server = make_server(host, port, app, Server, handler_class=_QuietHandler)
        except OSError as error:
            log.warning("cannot serve /metrics on %s:%d (%s); set METRICS_PORT to a free port", host, port, error)
            return None
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        log.info("metrics on http://%s:%d/metrics", host, port)
        return cls(server)

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()


_HEALTHY = json.dumps({"status": "ok"}).encode()
_UNHEALTHY = json.dumps({"status": "unavailable", "error": "not connected to NATS (reconnecting)"}).encode()


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
