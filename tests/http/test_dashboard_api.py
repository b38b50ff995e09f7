"""The dashboard's ``/api`` routes and pages in-process over a real nats-server (contract 1.3-1.4, 6.1-6.4).

The app is built as ``hades.runtime`` builds it; there is no executor, so submitted jobs stay ``Queued`` unless a
test appends their events itself. Live streams are tested against a real server in tests/integration.
"""

from __future__ import annotations

import asyncio
import string
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import bcrypt
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.config import Settings
from hades.core.events import JobFailed, JobStarted
from hades.core.redact import MASK
from hades.http.app import create_app
from hades.http.dashboard.config import DashboardConfig
from hades.http.dashboard.dashboard import Dashboard
from hades.http.dashboard.feed import JobFeed
from hades.http.dashboard.session import COOKIE
from hades.http.services import ApiServices
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.tasks import stop_all
from tests.conftest import eventually

PASSWORD = "correct horse battery"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
ENABLED = {
    "DASHBOARD_USERNAME": "admin",
    "DASHBOARD_PASSWORD_HASH": HASH,
    "DASHBOARD_SESSION_SECRET": "k" * 40,
    "HADES_VERSION": "1.4.0",
}
ONE_STEP = [{"id": 1, "name": "build", "image": "alpine:3", "script": "echo hi"}]
JSON = {"content-type": "application/json"}

MakeClient = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def make_client(nc: Client) -> AsyncIterator[MakeClient]:
    """``await make_client(**env)``: an API client over the app built with those settings (dashboard on by
    default); its views follow the event stream until the test ends."""
    tasks: list[asyncio.Task[None]] = []
    clients: list[httpx.AsyncClient] = []

    async def make(client_ip: str = "127.0.0.1", **env: str) -> httpx.AsyncClient:
        config = DashboardConfig.from_settings(Settings(**{**ENABLED, **env}))  # type: ignore[arg-type]
        store = NatsEventStore(nc)
        views = ReadModels()
        projections = ProjectionRunner(store.replay_batches, views.apply)
        clock = SystemClock()
        dashboard = None
        if config is not None:
            dashboard = Dashboard(config, JobFeed(views.jobs, config.redactor, clock.now))
            projections.observe(dashboard.feed.on_event)
        tasks.append(asyncio.create_task(projections.run(), name="test-projections"))
        services = ApiServices(store=store, logs=NatsLogStore(nc), views=views, projections=projections, clock=clock)
        app: Any = create_app(services, dashboard=dashboard)
        transport = httpx.ASGITransport(app=app, client=(client_ip, 40000))
        client = httpx.AsyncClient(transport=transport, base_url="https://hades.test")
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()
    await stop_all(tasks, patience=0.5)


@pytest.fixture
async def admin(make_client: MakeClient) -> httpx.AsyncClient:
    """A client logged in to a dashboard with the default settings."""
    return await logged_in(make_client)


async def logged_in(make_client: MakeClient, **env: str) -> httpx.AsyncClient:
    client = await make_client(**env)
    response = await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert response.status_code == 200, response.text
    return client


async def submit(client: httpx.AsyncClient, **fields: Any) -> str:
    response = await client.post("/build", json={"name": "job", "steps": ONE_STEP, **fields})
    assert response.status_code == 200, response.text
    return str(response.json()["job_id"])


# -- off ---------------------------------------------------------------------------------------------------------


async def test_while_off_every_api_path_answers_503_and_no_page_is_served(make_client: MakeClient) -> None:
    client = await make_client(DASHBOARD_SESSION_SECRET="")
    for method, path in [("POST", "/api/login"), ("GET", "/api/jobs"), ("GET", "/api/stream"), ("PUT", "/api/x/y")]:
        response = await client.request(method, path)
        assert response.status_code == 503, path
        assert response.json() == {"error": "dashboard is not configured"}
    assert (await client.get("/", headers={"accept": "text/html"})).status_code == 404
    assert (await client.get("/static/app.js")).status_code == 404
    jobs = await client.get("/jobs", headers={"accept": "text/html"})
    assert jobs.headers["content-type"].startswith("application/json")


# -- login, session, logout --------------------------------------------------------------------------------------


async def test_login_sets_a_strict_http_only_secure_cookie(make_client: MakeClient) -> None:
    client = await make_client()
    response = await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert response.status_code == 200
    assert response.json() == {"username": "admin", "version": "1.4.0"}
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/", "Max-Age=43200", "expires="):
        assert attribute.lower() in cookie.lower(), attribute
    session = await client.get("/api/session")
    assert session.json() == {"username": "admin", "version": "1.4.0"}


async def test_the_insecure_cookie_setting_drops_secure_and_the_ttl_is_honoured(make_client: MakeClient) -> None:
    client = await make_client(DASHBOARD_COOKIE_INSECURE="true", DASHBOARD_SESSION_TTL="90m")
    response = await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    cookie = response.headers["set-cookie"].lower()
    assert "secure" not in cookie
    assert "max-age=5400" in cookie


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"not json", 400, "invalid request"),
        (b"[]", 400, "invalid request"),
        (b'{"username": "admin"}', 400, "invalid request"),
        (b'{"username": 1, "password": 2}', 400, "invalid request"),
        (b'{"username": "admin", "password": "wrong"}', 401, "invalid credentials"),
        (b'{"username": "root", "password": "correct horse battery"}', 401, "invalid credentials"),
    ],
)
async def test_bad_logins(make_client: MakeClient, body: bytes, status: int, error: str) -> None:
    client = await make_client()
    response = await client.post("/api/login", content=body, headers=JSON)
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert "set-cookie" not in response.headers


async def test_five_failures_lock_the_address_out_even_with_the_right_password(make_client: MakeClient) -> None:
    client = await make_client()
    for _ in range(5):
        assert (await client.post("/api/login", json={"username": "admin", "password": "x"})).status_code == 401
    locked = await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert (locked.status_code, locked.json()) == (429, {"error": "too many failed attempts, try again later"})


async def test_behind_a_trusted_proxy_the_lockout_keys_on_the_forwarded_address(make_client: MakeClient) -> None:
    client = await make_client(client_ip="10.0.0.2", DASHBOARD_TRUSTED_PROXIES="10.0.0.0/8")
    for _ in range(5):
        await client.post("/api/login", json={"username": "a", "password": "x"}, headers={"x-forwarded-for": "1.1.1.1"})
    ok = {"username": "admin", "password": PASSWORD}
    assert (await client.post("/api/login", json=ok, headers={"x-forwarded-for": "1.1.1.1"})).status_code == 429
    assert (await client.post("/api/login", json=ok, headers={"x-forwarded-for": "2.2.2.2"})).status_code == 200


async def test_an_untrusted_peer_cannot_dodge_the_lockout_with_forwarded_for(make_client: MakeClient) -> None:
    client = await make_client(client_ip="203.0.113.1")
    for i in range(5):
        headers = {"x-forwarded-for": f"1.1.1.{i}"}
        await client.post("/api/login", json={"username": "a", "password": "x"}, headers=headers)
    ok = {"username": "admin", "password": PASSWORD}
    assert (await client.post("/api/login", json=ok, headers={"x-forwarded-for": "9.9.9.9"})).status_code == 429


@pytest.mark.parametrize("path", ["/api/session", "/api/jobs", "/api/metrics", "/api/stream", "/api/jobs/x/logs"])
async def test_without_a_session_the_api_answers_401(make_client: MakeClient, path: str) -> None:
    client = await make_client()
    response = await client.get(path)
    assert (response.status_code, response.json()) == (401, {"error": "authentication required"})
    client.cookies.set(COOKIE, "forged.token", domain="hades.test")
    response = await client.get(path)
    assert (response.status_code, response.json()) == (401, {"error": "invalid or expired session"})


async def test_an_expired_session_is_refused(make_client: MakeClient) -> None:
    client = await make_client(DASHBOARD_SESSION_TTL="1s")
    await client.post("/api/login", json={"username": "admin", "password": PASSWORD})
    assert (await client.get("/api/session")).status_code == 200

    async def expired() -> bool:
        return (await client.get("/api/session")).status_code == 401

    await eventually(expired, timeout=5)


async def test_logout_clears_the_cookie(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    response = await client.post("/api/logout")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "max-age=-1" in response.headers["set-cookie"].lower() or "expires=" in response.headers["set-cookie"]
    assert (await client.get("/api/session")).status_code == 401


async def test_unknown_api_paths_answer_404_json(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    response = await client.get("/api/nothing/here")
    assert (response.status_code, response.json()) == (404, {"error": "not found"})


# -- jobs --------------------------------------------------------------------------------------------------------


async def test_jobs_are_listed_newest_first_with_their_summaries(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    first = await submit(client, name="first", priority=1)
    second = await submit(client, name="second")
    body = (await client.get("/api/jobs")).json()
    ids = [job["id"] for job in body["jobs"]]
    assert ids.index(second) < ids.index(first)
    summary = next(job for job in body["jobs"] if job["id"] == first)
    assert summary.keys() == {"id", "name", "priority", "status", "stepCount", "queuedAt", "updatedAt"}
    assert (summary["name"], summary["priority"], summary["status"], summary["stepCount"]) == (
        "first", "low", "Queued", 1,
    )  # fmt: skip
    assert body["total"] >= 2


async def test_the_status_filter_is_case_insensitive_and_the_limit_bounds_the_list(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    for _ in range(3):
        await submit(client)
    queued = (await client.get("/api/jobs", params={"status": "qUeUeD", "limit": 2})).json()
    assert len(queued["jobs"]) == 2
    assert queued["total"] >= 3
    assert {job["status"] for job in queued["jobs"]} == {"Queued"}
    assert (await client.get("/api/jobs", params={"status": "succeeded"})).json()["jobs"] == [] or all(
        job["status"] == "Succeeded" for job in (await client.get("/api/jobs?status=succeeded")).json()["jobs"]
    )
    bad = await client.get("/api/jobs", params={"limit": 0})
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]


async def test_ended_jobs_leave_the_list_after_the_retention(
    make_client: MakeClient, event_store: NatsEventStore
) -> None:
    client = await logged_in(make_client, DASHBOARD_JOB_RETENTION="1s")
    job_id = await submit(client)
    now = datetime.now(UTC)
    last = (await event_store.history(job_id))[-1].seq
    seq = await event_store.append(job_id, [JobStarted(job_id=job_id, at=now, attempt=1, executor_id="e")], last)
    await event_store.append(job_id, [JobFailed(job_id=job_id, at=now, attempt=1, reason="boom")], seq)

    async def gone() -> bool:
        ids = [job["id"] for job in (await client.get("/api/jobs")).json()["jobs"]]
        return job_id not in ids

    await eventually(gone, timeout=10)
    assert (await client.get(f"/api/jobs/{job_id}")).json()["status"] == "Failed"  # still readable by id


async def test_the_detail_is_redacted_and_an_unknown_id_is_unknown(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    job_id = await submit(
        client,
        metadata={"GITHUB_TOKEN": "ghp_abcdef123456", "BUILD": "42"},
        steps=[
            {
                "id": 1,
                "name": "deploy",
                "image": "alpine:3",
                "script": "export API_KEY=sup3rs3cretvalue\necho deploying",
                "metadata": {"DB_PASSWORD": "hunter2hunter2", "MODE": "fast"},
                "cpu_limit": 2,
                "memory_limit": "128M",
            }
        ],
    )
    detail = (await client.get(f"/api/jobs/{job_id}")).json()
    assert detail["metadata"] == {"GITHUB_TOKEN": MASK, "BUILD": "42"}
    step = detail["steps"][0]
    assert step["metadata"] == {"DB_PASSWORD": MASK, "MODE": "fast"}
    assert "sup3rs3cretvalue" not in step["script"]
    assert "echo deploying" in step["script"]
    assert (step["cpuLimit"], step["memoryLimit"], step["status"], detail["payloadAvailable"]) == (
        2,
        "128M",
        "Pending",
        True,
    )
    unknown = str(uuid.uuid4())
    assert (await client.get(f"/api/jobs/{unknown}")).json() == {
        "id": unknown, "status": "Unknown", "timestamp": "0001-01-01T00:00:00Z", "metadata": {}, "steps": [],
        "payloadAvailable": False,
    }  # fmt: skip


async def test_all_mode_masks_every_metadata_value(make_client: MakeClient) -> None:
    client = await logged_in(make_client, SECRET_REDACT_MODE="all")
    job_id = await submit(client, metadata={"BUILD": "42", "EMPTY": ""})
    assert (await client.get(f"/api/jobs/{job_id}")).json()["metadata"] == {"BUILD": MASK, "EMPTY": ""}


async def test_the_detail_at_a_past_moment_and_the_timeline(
    make_client: MakeClient, event_store: NatsEventStore
) -> None:
    client = await logged_in(make_client)
    job_id = await submit(client)
    before = datetime.now(UTC)
    started = before + timedelta(seconds=1)
    last = (await event_store.history(job_id))[-1].seq
    await event_store.append(job_id, [JobStarted(job_id=job_id, at=started, attempt=1, executor_id="e")], last)

    async def running() -> bool:
        return (await client.get(f"/api/jobs/{job_id}")).json()["status"] == "Running"

    await eventually(running)
    past = (await client.get(f"/api/jobs/{job_id}", params={"at": before.isoformat()})).json()
    assert past["status"] == "Queued"
    timeline = (await client.get(f"/api/jobs/{job_id}/events")).json()["events"]
    assert [row["type"] for row in timeline] == ["submitted", "started"]  # no scheduler runs here
    assert "spec" not in timeline[0]
    bad = await client.get(f"/api/jobs/{job_id}", params={"at": "yesterday"})
    assert bad.status_code == 400


@pytest.mark.parametrize("suffix", ["events", "deliveries", "logs"])
async def test_job_routes_check_the_id(make_client: MakeClient, suffix: str) -> None:
    client = await logged_in(make_client)
    response = await client.get(f"/api/jobs/not-a-uuid/{suffix}")
    assert (response.status_code, response.json()) == (400, {"error": "invalid job id"})


async def test_logs_and_deliveries_of_a_job_without_any(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    job_id = await submit(client)
    assert (await client.get(f"/api/jobs/{job_id}/logs")).json() == {"logs": []}
    assert (await client.get(f"/api/jobs/{job_id}/deliveries")).json() == {"job_id": job_id, "deliveries": []}
    assert (await client.get(f"/api/jobs/{uuid.uuid4()}/deliveries")).status_code == 404
    unknown = uuid.uuid4()
    missing = await client.get(f"/api/jobs/{unknown}/logs")
    assert (missing.status_code, missing.json()) == (404, {"error": f"job not found: {unknown}"})


async def test_cancel_from_the_dashboard(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    job_id = await submit(client)
    plain = await client.post(f"/api/jobs/{job_id}/cancel", content=b"{}")
    assert plain.status_code == 415  # a cross-site form cannot send JSON without a preflight
    foreign = await client.post(f"/api/jobs/{job_id}/cancel", json={}, headers={"origin": "https://evil.example"})
    assert (foreign.status_code, foreign.json()) == (403, {"error": "cross-origin request refused"})
    ok = await client.post(
        f"/api/jobs/{job_id}/cancel", json={"reason": "wrong branch"}, headers={"origin": "https://hades.test"}
    )
    assert ok.status_code == 202
    assert ok.json()["status"] == "Stopped"
    events = (await client.get(f"/api/jobs/{job_id}/events")).json()["events"]
    request = next(row for row in events if row["type"] == "cancel_requested")
    assert request["by"] == "dashboard:admin"
    again = await client.post(f"/api/jobs/{job_id}/cancel", json={})
    assert again.status_code == 409


async def test_metrics_have_the_go_shape(make_client: MakeClient) -> None:
    client = await logged_in(make_client)
    await submit(client, priority=3)
    body = (await client.get("/api/metrics")).json()
    assert body.keys() >= {"statusCounts", "queueDepth", "durations", "throughputPerMin", "streamClients", "timestamp"}
    assert body["queueDepth"]["approximate"] is False
    assert body["queueDepth"]["byPriority"].keys() == {"high", "medium", "low"}
    assert body["queueDepth"]["byPriority"]["high"] >= 1
    assert body["durations"].keys() >= {"avgMs", "p95Ms", "count"}


# -- pages -------------------------------------------------------------------------------------------------------

HTML = {"accept": "text/html,application/xhtml+xml"}


@pytest.mark.parametrize("path", ["/", "/login", "/jobs", f"/jobs/{uuid.uuid4()}", "/some/where"])
async def test_browsers_get_the_app_with_the_security_headers(make_client: MakeClient, path: str) -> None:
    client = await make_client()
    response = await client.get(path, headers=HTML)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "/static/" in response.text
    assert response.headers["x-frame-options"] == "DENY"
    assert "default-src 'self'" in response.headers["content-security-policy"]


async def test_clients_still_get_json_from_the_log_manager_routes(make_client: MakeClient) -> None:
    client = await make_client()
    job_id = await submit(client)
    assert job_id in (await client.get("/jobs")).json()["jobs"]
    assert (await client.get(f"/jobs/{job_id}", headers={"accept": "application/json"})).json()["id"] == job_id


async def test_the_app_files_are_served(make_client: MakeClient) -> None:
    client = await make_client()
    response = await client.get("/static/app.js")
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert (await client.get("/static/../../config.py")).status_code == 404


# -- redaction, as a property of every /api answer ---------------------------------------------------------------

ALPHABET = string.ascii_letters + string.digits
secret_tokens = st.text(ALPHABET, min_size=12, max_size=20).map(lambda s: f"tok_{s}Zq9")
jwts = st.tuples(*[st.text(ALPHABET + "-_", min_size=8, max_size=20)] * 3).map(lambda p: "eyJ" + ".".join(p))
# a fixed odd infix keeps a generated secret from spelling a word of the response itself ("payloadAva")
url_passwords = st.text(ALPHABET, min_size=8, max_size=18).map(lambda s: f"{s[:4]}Pw9x{s[4:]}")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    token=secret_tokens,
    jwt=jwts,
    password=url_passwords,
    key=st.sampled_from(["GITHUB_TOKEN", "db_password", "Api-Key", "AWS_SECRET_ACCESS_KEY", "session_id"]),
    where=st.sampled_from(["job", "step"]),
)
async def test_a_secret_anywhere_in_a_job_never_leaves_through_the_api(
    admin: httpx.AsyncClient, token: str, jwt: str, password: str, key: str, where: str
) -> None:
    client = admin
    metadata = {key: token, "NOTE": jwt, "REPO": f"https://ci:{password}@git.example.com/r.git"}
    script = (
        f"echo start\nexport {key}={token}\ncurl -H 'Authorization: Bearer {jwt}' https://ci:{password}@x.example\n"
    )
    step = {"id": 1, "name": "s", "image": "alpine:3", "script": script}
    if where == "step":
        step["metadata"] = metadata
        job_id = await submit(client, steps=[step])
    else:
        job_id = await submit(client, steps=[step], metadata=metadata)
    bodies = [
        (await client.get(path)).text
        for path in (
            "/api/jobs", f"/api/jobs/{job_id}", f"/api/jobs/{job_id}/events", f"/api/jobs/{job_id}/deliveries",
            "/api/metrics",
        )
    ]  # fmt: skip
    for body in bodies:
        for secret in (token, jwt, password):
            assert secret not in body
