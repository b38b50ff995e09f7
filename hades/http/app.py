"""The litestar application: routes, the security headers on every response, and the API's state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from litestar import Litestar, Request, Response, get
from litestar.datastructures import MutableScopeHeaders, State
from litestar.exceptions import NotAuthorizedException
from litestar.types import Message, Scope

from hades.http.build import submit_build
from hades.http.cancel import cancel_job
from hades.http.deliveries import list_deliveries, redeliver_webhook
from hades.http.jobs import get_events, get_job, get_logs, get_status, health, list_jobs
from hades.http.prometheus import metrics
from hades.http.services import ApiServices

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


@get("/ping", sync_to_thread=False)
def ping() -> dict[str, str]:
    """Always open: ``{"status":"ok","timestamp":...}``."""
    return {"status": "ok", "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _security_headers(message: Message, _scope: Scope) -> None:
    """On every response, error responses built from exceptions included."""
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        for name, value in SECURITY_HEADERS.items():
            headers[name] = value


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
    health,
]
#: The Go Hades's Log Manager, alone (``hades logmanager``), for deployments that split it out.
LOG_MANAGER_ROUTES = [list_jobs, get_logs, get_status, health]


def create_app(services: ApiServices, routes: list[Any] | None = None) -> Litestar:
    """The API (or another set of its routes) over the given services."""
    return Litestar(
        route_handlers=routes or API_ROUTES,
        state=State({"services": services}),
        before_send=[_security_headers],
        exception_handlers={NotAuthorizedException: _unauthorized},
        openapi_config=None,
        request_max_body_size=10 * 1024 * 1024,
    )
