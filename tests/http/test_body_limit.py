"""``MAX_REQUEST_BYTES``: a larger body is refused with 413 naming the limit, before the rest of it is read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hades.config import Settings
from hades.http.app import MAX_REQUEST_BYTES
from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.feed import JobFeed
from hades.runtime import Roles
from tests.conftest import StartHades
from tests.http.conftest import AppClient
from tests.http.test_dashboard_api import ENABLED

LIMIT = 4096
TOO_LARGE = f"request body too large: the limit is {LIMIT} bytes (MAX_REQUEST_BYTES)"


def job_of_size(size: int) -> bytes:
    """A valid job, padded with blanks to exactly ``size`` bytes."""
    body = json.dumps({"name": "sized", "steps": [{"id": 1, "image": "busybox", "script": "true"}]}).encode()
    return body + b" " * (size - len(body))


def test_the_default_is_the_nats_default_max_payload() -> None:
    assert MAX_REQUEST_BYTES == 1024 * 1024


@pytest.mark.parametrize(("size", "status"), [(LIMIT - 1, 200), (LIMIT, 200), (LIMIT + 1, 413)])
async def test_a_body_just_under_at_and_just_over_the_limit(app_client: AppClient, size: int, status: int) -> None:
    async with app_client({"max_request_bytes": LIMIT}) as http:
        response = await http.post("/build", content=job_of_size(size), headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    if status == 413:
        assert response.text == TOO_LARGE
        assert response.headers["content-type"].startswith("text/plain")


async def test_an_endless_chunked_body_is_refused_without_reading_it_all(app_client: AppClient) -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:
            sent.append(1000)
            yield b"x" * 1000

    async with app_client({"max_request_bytes": LIMIT}) as http:
        response = await http.post("/build", content=endless(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.text == TOO_LARGE
    assert "content-length" not in response.request.headers
    assert sum(sent) <= LIMIT + 1000  # read up to the first chunk past the limit, not one more


async def test_a_chunked_body_under_the_limit_is_read_whole(app_client: AppClient) -> None:
    body = job_of_size(LIMIT)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    async with app_client({"max_request_bytes": LIMIT}) as http:
        response = await http.post("/build", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text


async def test_the_dashboard_routes_answer_their_own_error_shape(app_client: AppClient, api_services: Any) -> None:
    config = DashboardConfig.from_settings(Settings(**ENABLED))  # type: ignore[arg-type]
    assert config is not None
    dashboard = Dashboard(config, JobFeed(api_services.views.jobs, config.redactor, api_services.clock.now))
    async with app_client({"max_request_bytes": LIMIT, "dashboard": dashboard}) as http:
        response = await http.post(
            "/api/login", content=b"x" * (LIMIT + 1), headers={"content-type": "application/json"}
        )
    assert response.status_code == 413
    assert response.json() == {"error": TOO_LARGE}


async def test_the_cancel_route_refuses_a_large_body_too(app_client: AppClient) -> None:
    async with app_client({"max_request_bytes": LIMIT}) as http:
        url = "/jobs/00000000-0000-4000-8000-000000000000/cancel"
        response = await http.post(url, content=b"{" + b" " * LIMIT + b"}")
    assert (response.status_code, response.text) == (413, TOO_LARGE)


async def test_a_running_api_reads_max_request_bytes(start_hades: StartHades) -> None:
    hades = await start_hades(Roles(api=True), MAX_REQUEST_BYTES=str(LIMIT))
    over = await hades.client.post(
        "/build", content=job_of_size(LIMIT + 1), headers={"content-type": "application/json"}
    )
    assert (over.status_code, over.text) == (413, TOO_LARGE)
    under = await hades.client.post("/build", content=job_of_size(LIMIT), headers={"content-type": "application/json"})
    assert under.status_code == 200, under.text
