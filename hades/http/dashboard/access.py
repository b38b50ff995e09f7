"""What every dashboard route shares: its error and how it is answered, the guards (session cookie, same origin),
and the dashboard, services and job id a handler reads."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.handlers.base import BaseRouteHandler

from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.session import COOKIE, InvalidSession, verify_session
from hades.http.jobs import is_job_id
from hades.http.services import ApiServices


class DashboardError(HTTPException):
    """An ``/api`` refusal, answered as ``{"error": ...}``."""


def dashboard_error(_request: Request[Any, Any, State], error: DashboardError) -> Response[dict[str, str]]:
    """``{"error": detail}`` with the error's status."""
    return Response(content={"error": error.detail}, status_code=error.status_code, headers=error.headers or {})


def dashboard_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Dashboard:
    """The dashboard, or 503 while it is off."""
    dashboard: Dashboard | None = connection.app.state.dashboard
    if dashboard is None:
        raise DashboardError(status_code=503, detail="dashboard is not configured")
    return dashboard


def services_of(connection: ASGIConnection[Any, Any, Any, Any]) -> ApiServices:
    """The API's services (the read models, the stores)."""
    services: ApiServices = connection.app.state.services
    return services


def session_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """A valid session cookie, or 401 with the Go dashboard's two messages."""
    dashboard = dashboard_of(connection)
    token = connection.cookies.get(COOKIE)
    if not token:
        raise DashboardError(status_code=401, detail="authentication required")
    try:
        connection.state.user = verify_session(dashboard.config.secret, token, time.time())
    except InvalidSession:
        raise DashboardError(status_code=401, detail="invalid or expired session") from None


def same_origin_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """State-changing requests from another site are refused even if a browser sent the cookie along."""
    origin = connection.headers.get("origin")
    if origin and urlsplit(origin).netloc != connection.headers.get("host"):
        raise DashboardError(status_code=403, detail="cross-origin request refused")


def checked_job_id(job_id: str) -> str:
    """The job id, or 400 when it is not one."""
    if not is_job_id(job_id):
        raise DashboardError(status_code=400, detail="invalid job id")
    return job_id
