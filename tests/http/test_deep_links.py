"""The dashboard's page URLs (``/jobs``, ``/jobs/<id>``) are the Go-contract API's paths too: a browser reloading one
or opening a link to one gets the dashboard, with ``AUTH_KEY`` set or not, while an API client keeps getting the
JSON, and with ``AUTH_KEY`` set the Basic-auth challenge, exactly as before."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from hades.config import Settings
from hades.http.auth import REALM
from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.feed import JobFeed
from hades.http.dashboard.pages import asks_for_html
from hades.http.services import ApiServices
from tests.http.conftest import AppClient
from tests.http.test_dashboard_api import ENABLED, PASSWORD

KEY = "s3cret-key"
JOB = {"name": "linked", "steps": [{"id": 1, "name": "s", "image": "alpine:3", "script": "true"}]}
CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
#: What API clients send: Go's net/http nothing, curl and httpx ``*/*``, and clients that ask for JSON first.
API_ACCEPTS = [None, "*/*", "application/json", "application/json, text/html;q=0.5"]


def basic(password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"hades:{password}".encode()).decode()}


@contextlib.asynccontextmanager
async def hades(
    app_client: AppClient, services: ApiServices, auth_key: str, dashboard: bool = True
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The API with the dashboard on (cookie sent over plain HTTP) and ``auth_key``, and a job submitted to it."""
    board = None
    if dashboard:
        config = DashboardConfig.from_settings(Settings(**ENABLED, DASHBOARD_COOKIE_INSECURE=True))  # type: ignore[arg-type]
        assert config is not None
        board = Dashboard(config, JobFeed(services.views.jobs, config.redactor, services.clock.now))
    async with app_client({"dashboard": board}, auth_key=auth_key) as http:
        submitted = await http.post("/build", json=JOB, headers=basic(auth_key))
        assert submitted.status_code == 200, submitted.text
        yield http, submitted.json()["job_id"]


async def log_in(http: httpx.AsyncClient) -> None:
    response = await http.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert response.status_code == 200, response.text
    assert http.cookies  # sent with every request from now on


def assert_the_app(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/static/app.js">' in response.text
    assert "www-authenticate" not in response.headers


@pytest.mark.parametrize("auth_key", ["", KEY])
@pytest.mark.parametrize("session", [True, False])
@pytest.mark.parametrize("accept", [CHROME, FIREFOX, "text/html"])
async def test_a_browser_reloading_a_page_gets_the_app(
    app_client: AppClient, api_services: ApiServices, auth_key: str, session: bool, accept: str
) -> None:
    """Without a session too: the app then shows its login and comes back to the page (tests/browser)."""
    async with hades(app_client, api_services, auth_key) as (http, job_id):
        if session:
            await log_in(http)
        for path in ("/jobs", "/jobs?status=Failed", f"/jobs/{job_id}", f"/jobs/{job_id}/"):
            assert_the_app(await http.get(path, headers={"accept": accept}))


@pytest.mark.parametrize("accept", API_ACCEPTS)
async def test_api_clients_still_meet_the_basic_auth_challenge(
    app_client: AppClient, api_services: ApiServices, accept: str | None
) -> None:
    """A dashboard session is no API credential: with it, an API client is refused just the same."""
    async with hades(app_client, api_services, KEY) as (http, job_id):
        await log_in(http)
        headers = {"accept": accept} if accept is not None else {}
        for path in ("/jobs", f"/jobs/{job_id}", f"/jobs/{job_id}/status"):
            refused = await http.get(path, headers=headers)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"] == REALM
            assert refused.content == b""
        answered = await http.get(f"/jobs/{job_id}", headers={**headers, **basic(KEY)})
        assert answered.status_code == 200
        assert answered.json()["id"] == job_id
        assert job_id in (await http.get("/jobs", headers={**headers, **basic(KEY)})).json()["jobs"]


@pytest.mark.parametrize("accept", API_ACCEPTS)
async def test_api_clients_still_get_json_without_auth_key(
    app_client: AppClient, api_services: ApiServices, accept: str | None
) -> None:
    async with hades(app_client, api_services, "") as (http, job_id):
        headers = {"accept": accept} if accept is not None else {}
        answered = await http.get(f"/jobs/{job_id}", headers=headers)
        assert answered.headers["content-type"].startswith("application/json")
        assert answered.json()["id"] == job_id


async def test_without_the_dashboard_a_browser_meets_the_challenge_as_before(
    app_client: AppClient, api_services: ApiServices
) -> None:
    """No dashboard, no page to serve: the browser's prompt is then the way to read the JSON."""
    async with hades(app_client, api_services, KEY, dashboard=False) as (http, job_id):
        refused = await http.get(f"/jobs/{job_id}", headers={"accept": CHROME})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == REALM


async def test_what_is_never_a_page_stays_itself_for_browsers(app_client: AppClient, api_services: ApiServices) -> None:
    async with hades(app_client, api_services, KEY) as (http, job_id):
        await log_in(http)
        browser: dict[str, Any] = {"headers": {"accept": CHROME}}
        assert (await http.get(f"/jobs/{job_id}/artifacts/out", **browser)).status_code == 401
        assert (await http.get("/api/session", **browser)).json()["username"] == "admin"
        assert (await http.get("/ping", **browser)).json()["status"] == "ok"
        assert (await http.post(f"/jobs/{job_id}/cancel", **browser)).status_code == 401


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (CHROME, True),
        ("TEXT/HTML; charset=utf-8", True),
        (" text/html , */*", True),
        ("", False),
        ("*/*", False),
        ("application/json, text/html", False),
        ("text/html-sandboxed", False),
    ],
)
def test_only_a_request_naming_html_first_asks_for_it(accept: str, html: bool) -> None:
    assert asks_for_html(accept) is html


@pytest.mark.parametrize("auth_key", ["", KEY])
async def test_answers_that_depend_on_accept_say_so_to_caches(
    app_client: AppClient, api_services: ApiServices, auth_key: str
) -> None:
    """One URL, two answers (the page, the API's JSON or its challenge): ``Vary: Accept`` keeps a cache from
    handing one to the other's client. What is the same for everyone does not vary."""
    async with hades(app_client, api_services, auth_key) as (http, job_id):
        for path in ("/jobs", f"/jobs/{job_id}", f"/jobs/{job_id}/logs"):
            for headers in ({"accept": CHROME}, {"accept": "*/*", **basic(auth_key)}, {}):
                answer = await http.get(path, headers=headers)
                assert "Accept" in answer.headers.get_list("vary"), (path, headers, answer.status_code)
        for path in ("/ping", "/metrics", "/api/session"):
            assert "Accept" not in (await http.get(path, headers={"accept": CHROME})).headers.get_list("vary")


async def test_without_the_dashboard_nothing_varies_by_accept(app_client: AppClient, api_services: ApiServices) -> None:
    async with hades(app_client, api_services, "", dashboard=False) as (http, job_id):
        answer = await http.get(f"/jobs/{job_id}", headers={"accept": CHROME})
        assert answer.status_code == 200 and "vary" not in answer.headers
