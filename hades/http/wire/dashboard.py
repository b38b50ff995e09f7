"""The answers of the dashboard's own API (``/api/...``) and its refusals."""

from __future__ import annotations

from typing import Any, TypedDict

from hades.http.wire.answers import Error, json_answer
from hades.http.wire.jobs import DeliveryRow


class Session(TypedDict):
    """``POST /api/login`` and ``GET /api/session``."""

    username: str
    version: str


class LoggedOut(TypedDict):
    """``POST /api/logout``."""

    status: str


class DashboardJobs(TypedDict):
    """``GET /api/jobs``: JobSummary objects (camelCase, contract 1.4), newest first, and how many matched."""

    jobs: list[dict[str, Any]]
    total: int


class DashboardDeliveries(TypedDict):
    """``GET /api/jobs/{id}/deliveries``: as ``/jobs/{id}/deliveries``, URLs and errors redacted."""

    job_id: str
    deliveries: list[DeliveryRow]


DASHBOARD_REFUSALS = {
    401: json_answer(Error, "No session cookie, or an invalid or expired one"),
    503: json_answer(Error, "The dashboard is not configured"),
}
