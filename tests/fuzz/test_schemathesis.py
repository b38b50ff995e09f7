"""Schemathesis against the app's own OpenAPI document, served by a real Hades API over a real nats-server: for
every operation, generated requests get no 5xx, only documented status codes and content types, and bodies that
match the documented schemas.

The live streams (``/api/stream``, ``/api/jobs/{id}/logs/stream``) are left out: they never end by design. The
requests are made from a worker thread (schemathesis is synchronous), so the API keeps serving on the test's loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from hades.http.dashboard.session import COOKIE, sign_session
from hades.runtime import Roles
from tests.conftest import StartHades

EXAMPLES_PER_OPERATION = 25
ENDLESS = ("/api/stream", "/api/jobs/{job_id}/logs/stream")
CHECKS = [
    checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


def run_every_operation(base_url: str, cookies: dict[str, str]) -> list[str]:
    """Each operation's generated cases, checked; the operations run, as ``METHOD path``."""
    schema = schemathesis.openapi.from_url(f"{base_url}/schema/openapi.json")
    ran = []
    for result in schema.get_all_operations():
        operation: Any = result.ok()
        if operation.path in ENDLESS:
            continue

        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            case.call_and_validate(base_url=base_url, checks=CHECKS, cookies=cookies)

        check()
        ran.append(f"{operation.method.upper()} {operation.path}")
    return ran


async def test_every_operation_conforms_to_the_document(start_hades: StartHades) -> None:
    # The dashboard is on, with a session: while it is off its routes answer the Go Hades's 503 on purpose.
    secret = "s" * 40
    env = {"DASHBOARD_USERNAME": "admin", "DASHBOARD_PASSWORD_HASH": "$2b$04$" + "a" * 53}
    hades = await start_hades(Roles(api=True), DASHBOARD_SESSION_SECRET=secret, **env)
    cookies = {COOKIE: sign_session(secret.encode(), "admin", int(time.time()) + 3600)}
    ran = await asyncio.to_thread(run_every_operation, hades.url, cookies)
    assert "POST /build" in ran
    assert "GET /jobs/{job_id}" in ran
    assert len(ran) >= 20
