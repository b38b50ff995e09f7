"""Hypothesis against the real app in-process over a real nats-server: ``POST /build`` with any bytes, any JSON,
near-valid jobs mutated field by field, huge numbers, deep nesting, unicode edge cases and wrong content types, and
every route with parameters with ids and query values that are junk. Never a 5xx; every 4xx names its problem;
every job accepted with a 200 can be read back.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hades.config import Settings
from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.feed import JobFeed
from hades.http.dashboard.session import COOKIE
from hades.http.services import ApiServices
from tests.http.conftest import AppClient

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
VALID_JOB: dict[str, Any] = {
    "name": "fuzz",
    "metadata": {"K": "v"},
    "steps": [{"id": 1, "name": "s", "image": "alpine:3", "script": "true", "memory_limit": "1G", "cpu_limit": 1}],
    "timeout_seconds": 60,
    "priority": 2,
    "callback_url": "https://example.org/cb",
}
UNICODE_EDGES = st.sampled_from(
    ["", "\x00", "\ud800", "\udfff", "\ufeff", "\u202e", "\U0010ffff", "e\u0301", "ǅ", "\u017f", "K", "İ", "ß" * 50]
)
HUGE = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**400, 1e308, -0.0, 1.5, 2**63 - 1])
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.text() | UNICODE_EDGES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8) | UNICODE_EDGES, inner, max_size=3),
    max_leaves=20,
)


def _deep(depth: int) -> bytes:
    return b'{"name":"deep","metadata":' + b"[" * depth + b"]" * depth + b"}"


@st.composite
def near_valid(draw: st.DrawFn) -> bytes:
    """The valid job with one field (top level or in the step) replaced by something else, or removed."""
    job = json.loads(json.dumps(VALID_JOB))
    target = draw(st.sampled_from(["job", "step"]))
    fields = job if target == "job" else job["steps"][0]
    key = draw(st.sampled_from(sorted(fields)) | st.text(max_size=8) | UNICODE_EDGES)
    if draw(st.booleans()) and key in fields:
        del fields[key]
    else:
        fields[key] = draw(ANY_JSON)
    return json.dumps(job).encode()


BODIES = st.one_of(
    st.binary(max_size=200),
    ANY_JSON.map(lambda value: json.dumps(value).encode()),
    near_valid(),
    st.integers(min_value=1, max_value=3000).map(_deep),
    st.text(max_size=50).map(str.encode),
)
CONTENT_TYPES = st.sampled_from(
    ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "", "x/ä"]
).map(lambda content_type: content_type.encode())  # bytes: the client would refuse a non-ASCII str
JUNK_IDS = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["..", "../..", "../../etc/passwd", "*", ">", "a.b", "%00", "%2e%2e%2f", " ", "\u202e"]),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(str),
)
JUNK_VALUES = st.one_of(st.text(max_size=30), st.sampled_from(["", "-1", "0", "1e9", "99999999999999999999", "true"]))


def assert_names_the_problem(response: httpx.Response) -> None:
    """No 5xx; a 4xx says what is wrong, in words, without a stack trace."""
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        where = f"{response.request.method} {response.request.url.raw_path!r}: {response.status_code} {response.text!r}"
        assert response.text.strip(), where
        assert "Traceback" not in response.text
        if response.headers.get("content-type", "").startswith("application/json"):
            body = response.json()
            assert body.get("error") or body.get("detail"), where


@pytest.fixture
async def http(app_client: AppClient) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client() as client:
        yield client


@pytest.fixture
async def dashboard_http(app_client: AppClient, api_services: ApiServices) -> AsyncIterator[httpx.AsyncClient]:
    """A client with a valid dashboard session."""
    secret = "s" * 40
    env = {"DASHBOARD_USERNAME": "admin", "DASHBOARD_PASSWORD_HASH": "$2b$04$" + "a" * 53}
    config = DashboardConfig.from_settings(Settings(**env, DASHBOARD_SESSION_SECRET=secret))  # type: ignore[arg-type]
    assert config is not None
    dashboard = Dashboard(config, JobFeed(api_services.views.jobs, config.redactor, api_services.clock.now))
    async with app_client({"dashboard": dashboard}) as client:
        client.cookies.set(COOKIE, dashboard.session_token("admin", int(time.time()) + 3600))
        yield client


@FUZZ
@given(body=BODIES, content_type=CONTENT_TYPES)
async def test_build_never_fails_and_never_loses_an_accepted_job(
    http: httpx.AsyncClient, body: bytes, content_type: bytes
) -> None:
    response = await http.post("/build", content=body, headers={"content-type": content_type})
    assert_names_the_problem(response)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.headers["content-type"].startswith("text/plain")
    else:
        job_id = response.json()["job_id"]
        assert (await http.get(f"/jobs/{job_id}/status")).json() == {"status": "Queued"}


@FUZZ
@given(job_id=JUNK_IDS, value=JUNK_VALUES)
async def test_job_routes_with_junk_ids_and_query_values(http: httpx.AsyncClient, job_id: str, value: str) -> None:
    segment = quote(job_id, safe="")
    query = quote(value, safe="")
    for method, path in [
        ("GET", f"/jobs/{segment}"),
        ("GET", f"/jobs/{segment}?at={query}"),
        ("GET", f"/jobs/{segment}/status"),
        ("GET", f"/jobs/{segment}/events"),
        ("GET", f"/jobs/{segment}/logs"),
        ("GET", f"/jobs/{segment}/logs?follow={query}"),
        ("GET", f"/jobs/{segment}/deliveries"),
        ("GET", f"/jobs/{segment}/artifacts"),
        ("GET", f"/jobs/{segment}/artifacts/{query}"),
        ("GET", f"/jobs/{segment}/artifacts/dir/{query}"),
        ("POST", f"/jobs/{segment}/cancel"),
        ("POST", f"/jobs/{segment}/deliveries/redeliver"),
        ("POST", f"/jobs/{segment}/stages"),
    ]:
        response = await http.request(method, path, content=value.encode())
        assert_names_the_problem(response)


@FUZZ
@given(job_id=JUNK_IDS, value=JUNK_VALUES)
async def test_dashboard_routes_with_junk_ids_and_query_values(
    dashboard_http: httpx.AsyncClient, job_id: str, value: str
) -> None:
    segment, query = quote(job_id, safe=""), quote(value, safe="")
    json_body = {"content-type": "application/json"}
    for method, path in [
        ("GET", f"/api/jobs?limit={query}"),
        ("GET", f"/api/jobs?status={query}"),
        ("GET", f"/api/jobs/{segment}"),
        ("GET", f"/api/jobs/{segment}?at={query}"),
        ("GET", f"/api/jobs/{segment}/events"),
        ("GET", f"/api/jobs/{segment}/deliveries"),
        ("GET", f"/api/jobs/{segment}/logs"),
        ("GET", f"/api/jobs/{segment}/logs/stream"),  # no such job: answered at once, not a stream
        ("POST", f"/api/jobs/{segment}/cancel"),
        ("POST", "/api/login"),
    ]:
        response = await dashboard_http.request(method, path, content=value.encode(), headers=json_body)
        assert_names_the_problem(response)
