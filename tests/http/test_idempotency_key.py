"""``POST /build`` with ``Idempotency-Key``: a retried submission is the one job, never a second; the key sent with
another job is refused; without a key nothing changes (Go's contract). Through the app and its fast path, against
the real event log."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from hades.adapters.nats.event_store import NatsEventStore
from hades.http.app import MAX_REQUEST_BYTES, SECURITY_HEADERS, create_app
from hades.http.fast_build import BuildFastPath
from hades.http.services import ApiServices
from tests.http.conftest import AppClient

JOB = {"name": "graded", "steps": [{"id": 1, "image": "alpine:3", "script": "make test"}]}
OTHER = {"name": "graded", "steps": [{"id": 1, "image": "alpine:3", "script": "make test && make lint"}]}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def submitted_events(store: NatsEventStore, job_id: str) -> list[str]:
    return [recorded.event.type for recorded in await store.history(job_id) if recorded.event.type == "submitted"]


async def test_a_submission_sent_again_with_its_key_is_the_same_job(
    app_client: AppClient, event_store: NatsEventStore
) -> None:
    key = f"grading-{uuid.uuid4()}"
    async with app_client() as http:
        first = await http.post("/build", json=JOB, headers=keyed(key))
        again = await http.post("/build", json=JOB, headers=keyed(key))
        status = await http.get(f"/jobs/{first.json()['job_id']}/status")

    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() == {"message": "Successfully enqueued job", "job_id": first.json()["job_id"]}
    assert status.status_code == 200  # the repeat answers once the views hold the job, as the first did
    assert await submitted_events(event_store, first.json()["job_id"]) == ["submitted"]


async def test_requests_racing_with_one_key_make_one_job(app_client: AppClient, event_store: NatsEventStore) -> None:
    key = f"race-{uuid.uuid4()}"
    async with app_client() as http:
        answers = await asyncio.gather(*(http.post("/build", json=JOB, headers=keyed(key)) for _ in range(6)))

    assert {answer.status_code for answer in answers} == {200}
    (job_id,) = {answer.json()["job_id"] for answer in answers}
    assert await submitted_events(event_store, job_id) == ["submitted"]


async def test_a_key_sent_with_another_job_is_refused(app_client: AppClient) -> None:
    key = f"reused-{uuid.uuid4()}"
    async with app_client() as http:
        first = await http.post("/build", json=JOB, headers=keyed(key))
        other = await http.post("/build", json=OTHER, headers=keyed(key))

    assert other.status_code == 422
    assert other.text == (
        f"Idempotency-Key was used for a different job ({first.json()['job_id']}): a key stands for one job; send a "
        "new key for a new job"
    )


async def test_without_a_key_every_submission_is_a_job_of_its_own(app_client: AppClient) -> None:
    async with app_client() as http:
        ids = {(await http.post("/build", json=JOB)).json()["job_id"] for _ in range(2)}
    assert len(ids) == 2


async def test_a_key_that_cannot_be_one_is_a_400_naming_it(app_client: AppClient) -> None:
    async with app_client() as http:
        empty = await http.post("/build", json=JOB, headers=keyed(""))
        long = await http.post("/build", json=JOB, headers=keyed("k" * 256))
        latin = await http.post("/build", json=JOB, headers=[(b"Idempotency-Key", "clé".encode("latin-1"))])

    assert (empty.status_code, empty.text) == (400, "Invalid Idempotency-Key: it is empty")
    assert (long.status_code, long.text) == (400, "Invalid Idempotency-Key: at most 255 characters, not 256")
    assert (latin.status_code, latin.text) == (400, "Invalid Idempotency-Key: only printable ASCII characters")


async def test_the_fast_path_hands_keyed_submissions_to_the_handler(
    api_services: ApiServices, event_store: NatsEventStore
) -> None:
    app: Any = create_app(api_services)
    fast: Any = BuildFastPath(app, api_services, MAX_REQUEST_BYTES, SECURITY_HEADERS)
    key = f"fast-{uuid.uuid4()}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://test") as http:
        answers = [await http.post("/build", json=JOB, headers=keyed(key)) for _ in range(2)]

    (job_id,) = {answer.json()["job_id"] for answer in answers}
    assert await submitted_events(event_store, job_id) == ["submitted"]


async def test_requests_racing_with_one_key_and_different_jobs_make_one_job_and_refuse_the_others(
    app_client: AppClient, event_store: NatsEventStore
) -> None:
    """The log deduplicates a ``submitted`` of the same job id: without a look at what was stored, a racing request
    with another job would have been answered as if it were the first."""
    key = f"race-{uuid.uuid4()}"
    async with app_client() as http:
        answers = await asyncio.gather(
            *(http.post("/build", json=JOB if n % 2 else OTHER, headers=keyed(key)) for n in range(6))
        )

    assert sorted(answer.status_code for answer in answers) == [200, 200, 200, 422, 422, 422]
    (job_id,) = {answer.json()["job_id"] for answer in answers if answer.status_code == 200}
    stored = (await event_store.history(job_id))[0].event
    accepted_bodies = {n % 2 for n, answer in enumerate(answers) if answer.status_code == 200}
    assert len(accepted_bodies) == 1  # every 200 is for the job that was stored
    assert await submitted_events(event_store, job_id) == ["submitted"]
    assert stored.type == "submitted"
