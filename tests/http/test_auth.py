"""HTTP Basic auth on a real Hades (API and scheduler on a port, ``AUTH_KEY`` read from the settings).

``/build`` needs ``hades:<AUTH_KEY>`` when the key is set, as in the Go API. The read routes (``/jobs*``) need it
too: a deliberate choice, since the Go Log Manager had no auth only because it was cluster-internal, while ours
shares the public port. ``/ping`` and ``/health`` stay open; without a key everything is open.
"""

from __future__ import annotations

import base64
import uuid

import httpx
import pytest

from hades.runtime import Roles
from tests.conftest import RunningHades, StartHades

KEY = "s3cret-key"
GIN_REALM = 'Basic realm="Authorization Required"'
JOB = {"name": "auth", "steps": [{"id": 1, "image": "alpine:3", "script": "true"}]}
READ_ROUTES = ["/jobs", "/jobs/{id}", "/jobs/{id}/status", "/jobs/{id}/logs", "/jobs/{id}/events"]


@pytest.fixture
async def locked(start_hades: StartHades) -> RunningHades:
    """A Hades with AUTH_KEY set."""
    return await start_hades(Roles(api=True, scheduler=True), AUTH_KEY=KEY)


@pytest.fixture
async def unlocked(start_hades: StartHades) -> RunningHades:
    """A Hades with AUTH_KEY empty (explicitly, whatever the environment says)."""
    return await start_hades(Roles(api=True, scheduler=True), AUTH_KEY="")


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def submit_with_key(hades: RunningHades) -> str:
    response = await hades.client.post("/build", json=JOB, headers=basic("hades", KEY))
    assert response.status_code == 200, response.text
    return str(response.json()["job_id"])


def assert_challenged(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == GIN_REALM


# -- AUTH_KEY set ------------------------------------------------------------------------------------------------


async def test_build_without_credentials_is_challenged(locked: RunningHades) -> None:
    assert_challenged(await locked.client.post("/build", json=JOB))


@pytest.mark.parametrize(
    "headers",
    [
        basic("hades", "wrong"),
        basic("admin", KEY),
        basic("hades", ""),
        basic("hades", KEY + "x"),
        {"Authorization": f"Bearer {KEY}"},
        {"Authorization": "Basic not-base64!"},
        {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:" + KEY.encode()).decode()},
    ],
    ids=["wrong-password", "wrong-user", "empty-password", "longer-password", "bearer", "not-base64", "not-utf8"],
)
async def test_build_with_wrong_credentials_is_challenged(locked: RunningHades, headers: dict[str, str]) -> None:
    assert_challenged(await locked.client.post("/build", json=JOB, headers=headers))


async def test_build_with_the_key_is_accepted(locked: RunningHades) -> None:
    response = await locked.client.post("/build", json=JOB, auth=("hades", KEY))
    assert response.status_code == 200
    assert response.json()["message"] == "Successfully enqueued job"


async def test_refused_credentials_enqueue_nothing(locked: RunningHades) -> None:
    await submit_with_key(locked)  # the view has caught up with everything stored so far
    before = (await locked.client.get("/jobs", headers=basic("hades", KEY))).json()["jobs"]
    assert (await locked.client.post("/build", json=JOB, headers=basic("hades", "wrong"))).status_code == 401
    accepted = await submit_with_key(locked)
    assert (await locked.client.get("/jobs", headers=basic("hades", KEY))).json()["jobs"] == [*before, accepted]


@pytest.mark.parametrize("route", READ_ROUTES)
async def test_read_routes_are_challenged_without_the_key(locked: RunningHades, route: str) -> None:
    job_id = await submit_with_key(locked)
    assert_challenged(await locked.client.get(route.format(id=job_id)))
    assert_challenged(await locked.client.get(route.format(id=job_id), headers=basic("hades", "wrong")))


@pytest.mark.parametrize("route", READ_ROUTES)
async def test_read_routes_answer_with_the_key(locked: RunningHades, route: str) -> None:
    job_id = await submit_with_key(locked)
    response = await locked.client.get(route.format(id=job_id), headers=basic("hades", KEY))
    assert response.status_code == 200


@pytest.mark.parametrize(("route", "body"), [("/ping", "ok"), ("/health", "ok")])
async def test_ping_and_health_stay_open(locked: RunningHades, route: str, body: str) -> None:
    response = await locked.client.get(route)
    assert response.status_code == 200
    assert response.json()["status"] == body


@pytest.mark.parametrize(
    "body", [b"not json", b'{"name": ""}', b"x" * (2 * 1024 * 1024)], ids=["bad", "invalid", "huge"]
)
async def test_build_checks_the_credentials_before_it_reads_the_body(locked: RunningHades, body: bytes) -> None:
    """401, never the 400 or 413 the body would earn: nobody learns anything of the API without the key."""
    assert_challenged(await locked.client.post("/build", content=body, headers={"Content-Type": "application/json"}))


async def test_challenge_carries_the_security_headers(locked: RunningHades) -> None:
    response = await locked.client.post("/build", json=JOB)
    assert response.headers.get("x-frame-options") == "DENY"
    assert response.headers.get("content-security-policy", "").startswith("default-src 'self'")


async def test_challenge_body_is_empty_as_in_gin(locked: RunningHades) -> None:
    response = await locked.client.post("/build", json=JOB)
    assert response.content == b""


# -- AUTH_KEY empty ----------------------------------------------------------------------------------------------


async def test_build_is_open_without_a_key(unlocked: RunningHades) -> None:
    response = await unlocked.client.post("/build", json=JOB)
    assert response.status_code == 200


async def test_credentials_are_ignored_without_a_key(unlocked: RunningHades) -> None:
    response = await unlocked.client.post("/build", json=JOB, headers=basic("nobody", "anything"))
    assert response.status_code == 200


@pytest.mark.parametrize("route", READ_ROUTES)
async def test_read_routes_are_open_without_a_key(unlocked: RunningHades, route: str) -> None:
    job_id = (await unlocked.client.post("/build", json=JOB)).json()["job_id"]
    response = await unlocked.client.get(route.format(id=job_id))
    assert response.status_code == 200


async def test_unknown_job_is_404_not_401_without_a_key(unlocked: RunningHades) -> None:
    response = await unlocked.client.get(f"/jobs/{uuid.uuid4()}/status")
    assert response.status_code == 404
