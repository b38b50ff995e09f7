"""A submission made while the API's NATS connection is down publishes nothing until the connection is back: nats-py
would keep the publish and send it on reconnect, so a job answered ``500 Failed to enqueue job`` after a long outage
ran after all (and twice, if its client retried). A short outage is waited out; a long one is a true 500."""

from __future__ import annotations

import asyncio

import pytest

from hades.adapters.nats.event_store import NatsEventStore
from hades.http import build
from tests.http.conftest import AppClient

JOB = {"name": "while-away", "steps": [{"id": 1, "image": "alpine:3", "script": "true"}]}


async def test_a_long_outage_is_a_500_and_nothing_is_sent(
    app_client: AppClient, event_store: NatsEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "SUBMIT_PATIENCE_SECONDS", 0.3)
    before = await event_store.stream_last_seq()
    async with app_client(connected=lambda: False) as http:
        refused = await http.post("/build", json=JOB)

    assert (refused.status_code, refused.text) == (500, "Failed to enqueue job")
    assert await event_store.stream_last_seq() == before  # nothing was handed to the client to send later


async def test_a_connection_back_within_the_patience_is_waited_for(app_client: AppClient) -> None:
    back = asyncio.Event()
    async with app_client(connected=back.is_set) as http:
        submitting = asyncio.create_task(http.post("/build", json=JOB))
        await asyncio.sleep(0.2)  # the outage, as the test stages it
        assert not submitting.done()
        back.set()
        accepted = await submitting

    assert accepted.status_code == 200 and accepted.json()["job_id"]
