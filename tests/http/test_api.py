"""The HTTP routes in-process over a real nats-server: ``/ping``, ``POST /build``, the Log Manager routes, headers.

The app is built as ``hades.runtime`` builds it (real event store, real log store, a projection followed live), and
driven through httpx's ASGI transport; there is no executor, so a submitted job stays ``Queued``.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.core.logs import LogBudget
from hades.http.app import create_app
from hades.http.services import ApiServices
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.tasks import stop

# Contract 6.4, written out rather than imported so that a typo in the app fails here.
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "strict-transport-security": "max-age=63072000; includeSubDomains",
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
}
NAME_REQUIRED = 'Invalid request payload: "name" is required'
INVALID_JSON = "Invalid JSON body"
BAD_NETWORK = "invalid network mode: must be none, bridge, host, default, or a valid network name"
ONE_STEP = [{"id": 1, "name": "build", "image": "alpine:3", "script": "echo hi"}]


@pytest.fixture
async def client(nc: Client) -> AsyncIterator[httpx.AsyncClient]:
    """The API without AUTH_KEY, its jobs view following the event stream for the whole test."""
    store = NatsEventStore(nc)
    views = ReadModels()
    projections = ProjectionRunner(store.replay_batches, views.apply)
    follow = asyncio.create_task(projections.run(), name="test-projections")
    services = ApiServices(
        store=store, logs=NatsLogStore(nc), views=views, projections=projections, clock=SystemClock()
    )
    try:
        app: Any = create_app(services)  # litestar's ASGI signature is narrower than httpx's annotation
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http
    finally:
        await stop(follow, patience=0.5)


async def submit(client: httpx.AsyncClient, **fields: Any) -> str:
    """POST /build with a valid one-step job (plus ``fields``) and return the job id."""
    response = await client.post("/build", json={"name": "job", "steps": ONE_STEP, **fields})
    assert response.status_code == 200, response.text
    return str(response.json()["job_id"])


async def post_json(client: httpx.AsyncClient, payload: Any) -> httpx.Response:
    """POST /build with ``payload`` as JSON (``None`` included, which httpx's ``json=`` would drop)."""
    return await client.post("/build", content=json.dumps(payload), headers={"content-type": "application/json"})


def assert_plain_400(response: httpx.Response, message: str) -> None:
    assert response.status_code == 400
    assert response.text == message
    assert response.headers["content-type"].startswith("text/plain")


# -- /ping and /health ----------------------------------------------------------------------------------------


async def test_ping_answers_ok_with_an_rfc3339_utc_second(client: httpx.AsyncClient) -> None:
    response = await client.get("/ping")
    assert response.status_code == 200
    body = response.json()
    assert body.keys() == {"status", "timestamp"}
    assert body["status"] == "ok"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", body["timestamp"])
    stamp = datetime.strptime(body["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=1)


async def test_health_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_health_answers_503_naming_the_problem_while_the_nats_connection_is_down(nc: Client) -> None:
    """The API's readiness: a reconnecting process can neither accept nor read a job; ``/ping`` stays its liveness."""
    store = NatsEventStore(nc)
    views = ReadModels()
    services = ApiServices(
        store=store,
        logs=NatsLogStore(nc),
        views=views,
        projections=ProjectionRunner(store.replay_batches, views.apply),
        clock=SystemClock(),
        connected=lambda: False,
    )
    app: Any = create_app(services)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        health = await client.get("/health")
        ping = await client.get("/ping")

    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "error": "not connected to NATS (reconnecting)"}
    assert ping.status_code == 200


# -- POST /build: accepted --------------------------------------------------------------------------------------


async def test_build_answers_with_the_go_message_and_a_fresh_uuid(client: httpx.AsyncClient) -> None:
    response = await client.post("/build", json={"name": "job", "steps": ONE_STEP})
    assert response.status_code == 200
    body = response.json()
    assert body.keys() == {"message", "job_id"}
    assert body["message"] == "Successfully enqueued job"
    assert str(uuid.UUID(body["job_id"])) == body["job_id"]


async def test_build_overwrites_a_client_supplied_id(client: httpx.AsyncClient) -> None:
    theirs = str(uuid.uuid4())
    job_id = await submit(client, id=theirs)
    assert job_id != theirs
    assert (await client.get(f"/jobs/{theirs}/status")).status_code == 404


async def test_submitted_job_is_queued_at_once(client: httpx.AsyncClient) -> None:
    job_id = await submit(client)
    response = await client.get(f"/jobs/{job_id}/status")
    assert response.status_code == 200
    assert response.json() == {"status": "Queued"}


async def test_submitted_job_is_listed(client: httpx.AsyncClient) -> None:
    job_id = await submit(client)
    response = await client.get("/jobs")
    assert response.status_code == 200
    assert job_id in response.json()["jobs"]


async def test_job_detail_shows_name_priority_attempt_and_pending_steps(client: httpx.AsyncClient) -> None:
    steps = [*ONE_STEP, {"id": 2, "name": "test", "image": "busybox", "script": "true"}]
    job_id = await submit(client, name="detail", steps=steps, timeout_seconds=60)
    response = await client.get(f"/jobs/{job_id}")
    assert response.status_code == 200
    job = response.json()
    assert job["id"] == job_id
    assert (job["name"], job["status"], job["priority"], job["attempt"]) == ("detail", "Queued", "high", 0)
    assert job["timeout_seconds"] == 60
    assert job["submitted_at"].endswith("Z")
    assert [(s["id"], s["name"], s["image"], s["status"]) for s in job["steps"]] == [
        (1, "build", "alpine:3", "Pending"),
        (2, "test", "busybox", "Pending"),
    ]


async def test_events_start_with_submitted_and_carry_no_spec(client: httpx.AsyncClient) -> None:
    secrets = {"TOKEN": "job-secret-4711"}
    steps = [{**ONE_STEP[0], "metadata": {"PASSWORD": "step-secret-0815"}}]
    job_id = await submit(client, metadata=secrets, steps=steps, callback_url="https://u:cb-secret-42@example.org/cb")
    response = await client.get(f"/jobs/{job_id}/events")
    assert response.status_code == 200
    rows = response.json()["events"]
    assert rows[0]["type"] == "submitted"
    assert rows[0]["priority"] == "high"
    assert isinstance(rows[0]["seq"], int)
    assert rows[0]["at"].endswith("Z")
    assert all("spec" not in row and "metadata" not in row for row in rows)
    for secret in ("job-secret-4711", "step-secret-0815", "cb-secret-42"):
        assert secret not in response.text


async def test_job_detail_carries_no_metadata_either(client: httpx.AsyncClient) -> None:
    job_id = await submit(client, metadata={"TOKEN": "detail-secret-1234"})
    response = await client.get(f"/jobs/{job_id}")
    assert "detail-secret-1234" not in response.text


async def test_unknown_fields_are_ignored(client: httpx.AsyncClient) -> None:
    steps = [{**ONE_STEP[0], "colour": "blue", "retries": [1, 2]}]
    response = await client.post("/build", json={"name": "job", "steps": steps, "owner": {"team": "x"}})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "high"),
        ({"priority": 3}, "high"),
        ({"priority": 7}, "high"),
        ({"priority": 2}, "medium"),
        ({"priority": 1}, "low"),
        ({"priority": 0}, "low"),
        ({"priority": -5}, "low"),
    ],
)
async def test_priority_maps_to_its_queue(client: httpx.AsyncClient, fields: dict[str, int], expected: str) -> None:
    job_id = await submit(client, **fields)
    assert (await client.get(f"/jobs/{job_id}")).json()["priority"] == expected


# -- POST /build: refused, with the Go API's plain-text bodies ----------------------------------------------------


def step(**fields: Any) -> dict[str, Any]:
    return {**ONE_STEP[0], **fields}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param({}, NAME_REQUIRED, id="name-missing"),
        pytest.param({"name": ""}, NAME_REQUIRED, id="name-empty"),
        pytest.param(None, NAME_REQUIRED, id="top-level-null"),
        pytest.param({"name": 42}, f"{INVALID_JSON}: name: expected a string, not an integer", id="name-not-a-string"),
        pytest.param([{"name": "job"}], f"{INVALID_JSON}: expected an object, not an array", id="top-level-array"),
        pytest.param(
            {"name": "j", "steps": [step(cpu_limit=-1)]},
            f"{INVALID_JSON}: steps[0].cpu_limit: must be at least 0, not -1",
            id="cpu-limit-negative",
        ),
        pytest.param(
            {"name": "j", "steps": [step(id="1")]},
            f"{INVALID_JSON}: steps[0].id: expected an integer, not a string",
            id="step-id-not-an-integer",
        ),
        pytest.param(
            {"name": "j", "steps": ONE_STEP, "timeout_seconds": 1e12},
            f"{INVALID_JSON}: timeout_seconds: expected an integer, not a number with a fraction or exponent",
            id="int-with-an-exponent",
        ),
        pytest.param(
            {"name": "j", "id": "not-a-uuid"},
            f"{INVALID_JSON}: id: expected a UUID such as 0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11",
            id="id-not-a-uuid",
        ),
        pytest.param(
            {"name": "j", "timestamp": "yesterday"},
            f"{INVALID_JSON}: timestamp: expected an RFC 3339 time with a zone, such as 2024-05-01T10:20:30Z",
            id="timestamp-not-rfc3339",
        ),
        pytest.param(
            {"name": "j", "metadata": {"N": 1}},
            f'{INVALID_JSON}: metadata["N"]: expected a string, not an integer',
            id="metadata-value-not-a-string",
        ),
        pytest.param(
            {"name": "j", "steps": {"id": 1}},
            f"{INVALID_JSON}: steps: expected an array of steps, not an object",
            id="steps-not-an-array",
        ),
        pytest.param({"name": "j", "timeout_seconds": -1}, "timeout_seconds cannot be negative", id="timeout-neg"),
        pytest.param(
            {"name": "j", "timeout_seconds": 9223372037},
            "timeout_seconds must not exceed 9223372036",
            id="timeout-too-big",
        ),
        pytest.param({"name": "j", "steps": [step(memory_limit="lots")]}, "Failed to parse RAM limit", id="ram"),
        pytest.param(
            {"name": "j", "steps": [step(memory_limit="1G", memory_swap="2T")]},
            "Failed to parse memory_swap limit",
            id="swap-unparseable",
        ),
        pytest.param(
            {"name": "j", "steps": [step(memory_swap="2G")]},
            "memory_swap requires memory_limit to be set",
            id="swap-without-limit",
        ),
        pytest.param(
            {"name": "j", "steps": [step(memory_limit="2G", memory_swap="512M")]},
            "memory_swap must be greater than or equal to memory_limit",
            id="swap-below-limit",
        ),
        pytest.param({"name": "j", "steps": [step(pids_limit=-1)]}, "pids_limit cannot be negative", id="pids"),
        pytest.param({"name": "j", "steps": [step(network="-bad")]}, BAD_NETWORK, id="network"),
        pytest.param(
            {"name": "j", "callback_url": "http://a%zz/"},
            "Invalid callback_url: callback URL is not parseable",
            id="callback-unparseable",
        ),
        pytest.param(
            {"name": "j", "callback_url": "/hook"},
            "Invalid callback_url: callback URL must be absolute",
            id="callback-relative",
        ),
        pytest.param(
            {"name": "j", "callback_url": "ftp://example.org/hook"},
            "Invalid callback_url: callback URL scheme must be http or https",
            id="callback-scheme",
        ),
        pytest.param(
            {"name": "j", "callback_url": "http:///hook"},
            "Invalid callback_url: callback URL must include a host",
            id="callback-no-host",
        ),
    ],
)
async def test_invalid_job_gets_the_go_message(client: httpx.AsyncClient, payload: Any, message: str) -> None:
    assert_plain_400(await post_json(client, payload), message)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param({"name": "j"}, "Invalid steps: a job needs at least one step", id="steps-missing"),
        pytest.param({"name": "j", "steps": []}, "Invalid steps: a job needs at least one step", id="steps-empty"),
        pytest.param({"name": "j", "steps": None}, "Invalid steps: a job needs at least one step", id="steps-null"),
        pytest.param(
            {"name": "j", "steps": [{"id": 1, "script": "true"}]},
            "Invalid steps[0].image: a step needs an image to run in",
            id="image-missing",
        ),
        pytest.param(
            {"name": "j", "steps": [step(id=1), step(id=1)]},
            "Invalid steps[1].id: step id 1 is used by an earlier step",
            id="step-id-twice",
        ),
        pytest.param(
            {"name": "j", "steps": ONE_STEP, "metadata": {"A=B": "x"}},
            "Invalid metadata: key 'A=B' cannot be an environment variable name (empty, or has = or NUL)",
            id="metadata-key-with-equals",
        ),
        pytest.param(
            {"name": "j", "steps": [step(metadata={"": "x"})]},
            "Invalid steps[0].metadata: key '' cannot be an environment variable name (empty, or has = or NUL)",
            id="step-metadata-key-empty",
        ),
        pytest.param(
            {"name": "t", "stpes": ONE_STEP},
            'unknown field "stpes" (did you mean "steps"?)',
            id="job-key-misspelt",
        ),
        pytest.param(
            {"name": "t", "steps": [step(scirpt="exit 1")]},
            'unknown field "steps[0].scirpt" (did you mean "script"?)',
            id="step-key-misspelt",
        ),
    ],
)
async def test_a_job_that_could_not_run_as_meant_is_refused_naming_why(
    client: httpx.AsyncClient, payload: Any, message: str
) -> None:
    assert_plain_400(await post_json(client, payload), message)


async def test_a_pipeline_needs_no_steps_of_its_own(client: httpx.AsyncClient) -> None:
    stage = {"name": "build", "steps": ONE_STEP}
    assert (await post_json(client, {"name": "p", "stages": [stage]})).status_code == 200


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param({"timeout_seconds": -1}, NAME_REQUIRED, id="name-before-timeout"),
        pytest.param(
            {"name": "j", "timeout_seconds": -1, "steps": [step(pids_limit=-1)]},
            "timeout_seconds cannot be negative",
            id="timeout-before-steps",
        ),
        pytest.param(
            {"name": "j", "steps": [step(pids_limit=-1), step(memory_limit="x")]},
            "pids_limit cannot be negative",
            id="steps-in-array-order",
        ),
        pytest.param(
            {"name": "j", "steps": [step(network="-bad")], "callback_url": "/hook"},
            BAD_NETWORK,
            id="steps-before-callback",
        ),
    ],
)
async def test_first_problem_in_go_order_wins(client: httpx.AsyncClient, payload: Any, message: str) -> None:
    assert_plain_400(await post_json(client, payload), message)


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b'{"name": "job"', b"\xff\xfe", b"NaN"],
    ids=["empty", "not-json", "truncated", "not-utf8", "nan"],
)
async def test_undecodable_body_is_invalid_json(client: httpx.AsyncClient, raw: bytes) -> None:
    response = await client.post("/build", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.text.startswith(f"{INVALID_JSON}: "), response.text  # Go's message, then what is wrong


async def test_a_byte_order_mark_is_named(client: httpx.AsyncClient) -> None:
    raw = b"\xef\xbb\xbf" + json.dumps({"name": "job", "steps": ONE_STEP}).encode()
    response = await client.post("/build", content=raw, headers={"content-type": "application/json"})
    assert_plain_400(
        response, f"{INVALID_JSON}: the body starts with a UTF-8 byte order mark; send the JSON without it"
    )


async def test_refused_job_is_not_stored(client: httpx.AsyncClient) -> None:
    await submit(client)  # the view has caught up with everything stored so far
    before = (await client.get("/jobs")).json()["jobs"]
    assert (await client.post("/build", json={"name": ""})).status_code == 400
    accepted = await submit(client)
    assert (await client.get("/jobs")).json()["jobs"] == [*before, accepted]


async def test_job_too_large_for_one_message_is_a_client_error(client: httpx.AsyncClient) -> None:
    # Under MAX_REQUEST_BYTES as sent, but every short step is written out in full in the ``submitted`` event.
    response = await client.post("/build", json={"name": "big", "steps": [{"image": "a"}] * 50_000})
    assert response.status_code == 413
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("job too large: ")


# -- the Log Manager routes and our job views -------------------------------------------------------------------


async def test_status_of_unknown_job_is_404_with_the_go_error(client: httpx.AsyncClient) -> None:
    job_id = str(uuid.uuid4())
    response = await client.get(f"/jobs/{job_id}/status")
    assert response.status_code == 404
    assert response.json() == {"error": f"job not found: {job_id}"}


async def test_logs_of_unknown_job_are_empty(client: httpx.AsyncClient) -> None:
    response = await client.get(f"/jobs/{uuid.uuid4()}/logs")
    assert response.status_code == 200
    assert response.json() == {"logs": []}


@pytest.mark.parametrize("suffix", ["", "/events"])
async def test_unknown_job_detail_and_events_are_404(client: httpx.AsyncClient, suffix: str) -> None:
    job_id = str(uuid.uuid4())
    response = await client.get(f"/jobs/{job_id}{suffix}")
    assert response.status_code == 404
    assert response.json() == {"error": f"job not found: {job_id}"}


async def test_logs_come_back_per_container_in_the_go_shape(client: httpx.AsyncClient, nc: Client) -> None:
    job_id = str(uuid.uuid4())
    await write_log_line(nc, job_id, "hello from step one")
    response = await client.get(f"/jobs/{job_id}/logs")
    assert response.status_code == 200
    [log] = response.json()["logs"]
    assert (log["job_id"], log["container_id"]) == (job_id, "container-1")
    assert [(e["message"], e["output_stream"]) for e in log["logs"]] == [("hello from step one", "stdout")]


async def write_log_line(nc: Client, job_id: str, message: str) -> None:
    writer = NatsLogStore(nc).writer(job_id, step_id=1, budget=LogBudget(), attempt=1)
    await writer.open("container-1")
    await writer.write("stdout", datetime.now(UTC), message)
    await writer.close()


# Job ids are interpolated into NATS subjects (hades.events.<id>.>, hades.logs.<id>) unchecked, so a wildcard
# token reads every job's stream. A job id is a UUID; anything else should be an unknown job.


async def test_wildcard_id_does_not_read_other_jobs_events(client: httpx.AsyncClient) -> None:
    await submit(client)
    response = await client.get("/jobs/*/events")
    assert response.status_code == 404


@pytest.mark.parametrize("wildcard", ["*", ">"])
async def test_wildcard_id_does_not_read_other_jobs_logs(client: httpx.AsyncClient, nc: Client, wildcard: str) -> None:
    await write_log_line(nc, str(uuid.uuid4()), "someone else's output")
    response = await client.get(f"/jobs/{wildcard}/logs")
    assert response.json() == {"logs": []}


# -- security headers (contract 6.4) ---------------------------------------------------------------------------


def assert_security_headers(response: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, name


@pytest.mark.parametrize(
    ("method", "path", "payload"),
    [
        ("GET", "/ping", None),
        ("GET", "/health", None),
        ("POST", "/build", {"name": "headers", "steps": ONE_STEP}),
        ("POST", "/build", {"name": ""}),
        ("GET", "/jobs", None),
        ("GET", "/jobs/00000000-0000-0000-0000-000000000000", None),
        ("GET", "/jobs/00000000-0000-0000-0000-000000000000/status", None),
        ("GET", "/jobs/00000000-0000-0000-0000-000000000000/events", None),
        ("GET", "/jobs/00000000-0000-0000-0000-000000000000/logs", None),
    ],
    ids=["ping", "health", "build-200", "build-400", "jobs", "job-404", "status-404", "events-404", "logs"],
)
async def test_security_headers_on_route_responses(
    client: httpx.AsyncClient, method: str, path: str, payload: Any
) -> None:
    assert_security_headers(await client.request(method, path, json=payload))


@pytest.mark.parametrize(
    ("method", "path", "content"),
    [("GET", "/no-such-route", b""), ("DELETE", "/ping", b""), ("POST", "/build", b"x" * (10 * 1024 * 1024 + 1))],
    ids=["unknown-route-404", "wrong-method-405", "body-too-large-413"],
)
async def test_security_headers_on_framework_errors(
    client: httpx.AsyncClient, method: str, path: str, content: bytes
) -> None:
    assert_security_headers(await client.request(method, path, content=content))


# -- random bodies never crash /build ---------------------------------------------------------------------------

JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
ANY_JSON = st.recursive(
    JSON_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
)
MEMORY = st.sampled_from(["", "1G", "2g", "512M", "0M", "+1G", "-1G", "1T", "G", "9223372036854775807G"]) | st.text()
RFC3339 = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])).map(
    lambda moment: moment.isoformat().replace("+00:00", "Z")
)
# Each field as a job would carry it: right type, any value (often a sensible one).
COUNT = st.integers(min_value=0, max_value=3600) | st.integers()
STEP_FIELDS = {
    "id": COUNT,
    "name": st.text(),
    "image": st.sampled_from(["alpine:3", ""]) | st.text(),
    "script": st.text(),
    "continue_on_error": st.booleans(),
    "metadata": st.dictionaries(st.text(), st.text()),
    "cpu_limit": COUNT,
    "memory_limit": MEMORY,
    "memory_swap": MEMORY,
    "pids_limit": COUNT,
    "network": st.sampled_from(["none", "host", "my_net.1", "-x", ""]) | st.text(),
}
JOB_FIELDS = {
    "id": st.uuids().map(str) | st.text(),
    "timestamp": RFC3339 | st.text(),
    "metadata": st.dictionaries(st.text(), st.text()),
    "steps": st.lists(st.fixed_dictionaries({}, optional=STEP_FIELDS), max_size=3),
    "callback_url": st.sampled_from(["https://example.org/cb", "http://[::1]:80/", "x:y", ""]) | st.text(),
    "timeout_seconds": COUNT,
    "priority": st.integers(),
}


def wild(fields: dict[str, st.SearchStrategy[Any]]) -> dict[str, st.SearchStrategy[Any]]:
    """The same fields, each sometimes any JSON value at all."""
    return {name: strategy | ANY_JSON for name, strategy in fields.items()}


WELL_TYPED_JOB = st.fixed_dictionaries({"name": st.text(min_size=1)}, optional=JOB_FIELDS)
WILD_JOB = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text() | ANY_JSON,
        **wild(JOB_FIELDS),
        "steps": st.lists(st.fixed_dictionaries({}, optional=wild(STEP_FIELDS)), max_size=3) | ANY_JSON,
    },
)
BODY = st.one_of(
    WELL_TYPED_JOB.map(lambda job: json.dumps(job).encode()),
    WILD_JOB.map(lambda job: json.dumps(job).encode()),
    st.dictionaries(st.text(), ANY_JSON).map(lambda obj: json.dumps(obj).encode()),
    st.binary(max_size=64),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODY)
async def test_random_bodies_get_200_or_400_never_5xx(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post("/build", content=body, headers={"content-type": "application/json"})
    event(f"status {response.status_code}")
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.headers["content-type"].startswith("text/plain")
