"""The litestar application: routes, the security headers on every response, and the API's state."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from litestar import Litestar, Request, Response, get
from litestar.datastructures import MutableScopeHeaders, State
from litestar.enums import MediaType
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.logging.config import LoggingConfig
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import Message, Scope

from hades.http.artifacts import download_artifact, list_artifacts
from hades.http.build import submit_build
from hades.http.cancel import cancel_job
from hades.http.dashboard.access import DashboardError, dashboard_error
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.pages import is_page, pages_before_guards
from hades.http.dashboard.routes import ROUTES as DASHBOARD_ROUTES
from hades.http.dashboard.routes import STATIC_FILES, index_html
from hades.http.deliveries import list_deliveries, redeliver_webhook
from hades.http.jobs import get_events, get_job, get_logs, get_status, health, list_jobs
from hades.http.openapi import PATH as OPENAPI_PATH
from hades.http.openapi import openapi_config
from hades.http.pipelines import add_stages
from hades.http.prometheus import metrics
from hades.http.services import ApiServices
from hades.http.wire.answers import Pong, json_answer

log = logging.getLogger(__name__)

#: ``MAX_REQUEST_BYTES``'s default: the NATS server's default ``max_payload``, so a job the API reads fits in one event.
MAX_REQUEST_BYTES = 1024 * 1024
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Strict-Transport-Security": "max-age=63072000; includeSubDomains",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
}


@get("/ping", sync_to_thread=False, responses={200: json_answer(Pong, "Always open")})
def ping() -> dict[str, str]:
    """Always open: ``{"status":"ok","timestamp":...}``."""
    return {"status": "ok", "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


async def _security_headers(message: Message, scope: Scope) -> None:
    """On every response, error responses built from exceptions included.

    ``async`` on purpose: litestar runs a plain ``def`` hook in a worker thread for every message sent, each SSE
    frame included, which made the thread pool the bottleneck of the live feed (200 clients: p95 102 ms → 21 ms).
    """
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        for name, value in SECURITY_HEADERS.items():
            headers[name] = value
        if scope["path"] == OPENAPI_PATH or scope["path"].startswith(f"{OPENAPI_PATH}/"):
            del headers["Content-Security-Policy"]  # the Swagger UI's scripts come from a CDN (Go skips /swagger too)


def _unauthorized(_request: Request[Any, Any, State], error: NotAuthorizedException) -> Response[bytes]:
    """Gin's stock Basic-auth refusal: 401, an empty body, the challenge header."""
    return Response(content=b"", status_code=401, headers=error.headers or {})


API_ROUTES = [
    ping,
    metrics,
    submit_build,
    cancel_job,
    list_jobs,
    get_job,
    get_status,
    get_logs,
    get_events,
    list_deliveries,
    redeliver_webhook,
    list_artifacts,
    download_artifact,
    add_stages,
    health,
]
#: The Go Hades's Log Manager, alone (``hades logmanager``), for deployments that split it out.
LOG_MANAGER_ROUTES = [list_jobs, get_logs, get_status, health]


def _too_large(request: Request[Any, Any, State], _error: RequestEntityTooLarge) -> Response[Any]:
    """413 naming the limit, raised while the body is read: on ``Content-Length`` alone, or once a chunked body
    has passed the limit (the rest is never read). The dashboard's ``/api`` routes answer ``{"error": ...}``."""
    limit = request.route_handler.resolve_request_max_body_size()
    message = f"request body too large: the limit is {limit} bytes (MAX_REQUEST_BYTES)"
    if request.url.path.startswith("/api/"):
        return Response(content={"error": message}, status_code=413)
    return Response(content=message, status_code=413, media_type=MediaType.TEXT)


def _internal_error(request: Request[Any, Any, State], error: Exception) -> Response[Any]:
    """A failure of ours: logged with its traceback (litestar logs none unless in debug mode), answered as litestar
    does, without the details."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return Response(content={"status_code": 500, "detail": "Internal Server Error"}, status_code=500)


def _not_found(request: Request[Any, Any, State], error: NotFoundException) -> Response[Any]:
    """The dashboard's pages (``/``, ``/login``...) when it is on; litestar's JSON 404 otherwise."""
    if is_page(request):
        return index_html()
    return Response(content={"status_code": 404, "detail": error.detail}, status_code=404)


def create_app(
    services: ApiServices,
    routes: list[Any] | None = None,
    dashboard: Dashboard | None = None,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    debug: bool = False,
) -> Litestar:
    """The API (or another set of its routes) over the given services, with the dashboard when it is configured.

    The dashboard's ``/api`` routes are always there: while it is off they answer 503, as the Go Hades's do. No
    request body larger than ``max_request_bytes`` is read. The OpenAPI document is at ``/schema`` (with the
    Swagger UI when ``debug``).
    """
    handlers = list(routes or [*API_ROUTES, *DASHBOARD_ROUTES])
    if dashboard is not None and routes is None:
        handlers.append(STATIC_FILES)
    return Litestar(
        route_handlers=handlers,
        state=State({"services": services, "dashboard": dashboard}),
        middleware=[pages_before_guards] if dashboard is not None else [],
        before_send=[_security_headers],
        exception_handlers={
            NotAuthorizedException: _unauthorized,
            DashboardError: dashboard_error,
            NotFoundException: _not_found,
            RequestEntityTooLarge: _too_large,
            HTTP_500_INTERNAL_SERVER_ERROR: _internal_error,
        },
        openapi_config=openapi_config(debug),
        request_max_body_size=max_request_bytes,
        # Only litestar's own logger: its default also reconfigured the root logger, which replaced the format and
        # level `hades` set up (DEBUG=true printed no debug lines) and every handler already on it.
        logging_config=LoggingConfig(configure_root_logger=False),
    )
