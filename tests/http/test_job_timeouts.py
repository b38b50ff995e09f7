"""The deployment's default and maximum timeout through the API in-process, over real NATS: the ``submitted``
event holds the effective timeout (so every executor, retry and replay enforces it), ``GET /jobs/{id}`` shows it,
and a stage added to a running pipeline is capped as a declared one is."""

from __future__ import annotations

from typing import Any

import httpx

from hades.adapters.nats.pipeline_tokens import pipeline_token
from hades.core.events import JobSubmitted, StagesAdded
from hades.core.timeouts import TimeoutPolicy
from hades.http.services import ApiServices
from tests.http.conftest import AppClient

POLICY = TimeoutPolicy(default_seconds=60, max_seconds=300)
STEPS = [{"id": 1, "name": "s", "image": "alpine:3", "script": "true"}]  # harmless if a later test runs it
KEY = b"k" * 32


async def accepted(http: httpx.AsyncClient, **fields: Any) -> str:
    answer = await http.post("/build", json={"name": "job", "steps": STEPS, **fields})
    assert answer.status_code == 200, answer.text  # capped, never refused
    return str(answer.json()["job_id"])


async def submitted_event(services: ApiServices, job_id: str) -> JobSubmitted:
    recorded = await services.store.submitted(job_id)
    assert recorded is not None and isinstance(recorded.event, JobSubmitted)
    return recorded.event


async def test_a_job_without_a_timeout_gets_the_default_and_one_above_the_cap_is_capped(
    app_client: AppClient, api_services: ApiServices
) -> None:
    async with app_client(timeouts=POLICY) as http:
        none = await accepted(http)
        large = await accepted(http, timeout_seconds=9223372036)  # the Go contract's maximum
        fine = await accepted(http, timeout_seconds=120)

        events = {job: await submitted_event(api_services, job) for job in (none, large, fine)}
        details = {job: (await http.get(f"/jobs/{job}")).json() for job in (none, large, fine)}

    assert (events[none].spec.timeout_seconds, events[none].requested_timeout_seconds) == (60, 0)
    assert (events[large].spec.timeout_seconds, events[large].requested_timeout_seconds) == (300, 9223372036)
    assert (events[fine].spec.timeout_seconds, events[fine].requested_timeout_seconds) == (120, None)
    assert (details[none]["timeout_seconds"], details[none]["requested_timeout_seconds"]) == (60, 0)
    assert (details[large]["timeout_seconds"], details[large]["requested_timeout_seconds"]) == (300, 9223372036)
    assert details[fine]["timeout_seconds"] == 120 and "requested_timeout_seconds" not in details[fine]


async def test_without_a_policy_a_job_keeps_the_go_forever(app_client: AppClient, api_services: ApiServices) -> None:
    async with app_client() as http:
        job = await accepted(http)
        detail = (await http.get(f"/jobs/{job}")).json()
    event = await submitted_event(api_services, job)
    assert event.spec.timeout_seconds == 0 and event.requested_timeout_seconds is None
    assert detail["timeout_seconds"] == 0 and "requested_timeout_seconds" not in detail


async def test_declared_and_added_stages_are_capped(app_client: AppClient, api_services: ApiServices) -> None:
    stage = {"steps": STEPS}
    async with app_client(timeouts=POLICY, pipeline_token_key=KEY) as http:
        answer = await http.post("/build", json={"name": "p", "stages": [{"name": "a", **stage}]})
        pipeline = answer.json()["job_id"]
        added = await http.post(
            f"/jobs/{pipeline}/stages",
            json={"stages": [{"name": "b", "timeout_seconds": 5000, **stage}], "stage": "a"},
            headers={"Authorization": f"Bearer {pipeline_token(KEY, pipeline)}"},
        )
        assert added.status_code == 202, added.text

    history = await api_services.store.history(pipeline)
    submitted, stages_added = (recorded.event for recorded in history)
    assert isinstance(submitted, JobSubmitted) and submitted.spec.timeout_seconds == 60  # the stages' default
    assert isinstance(stages_added, StagesAdded) and [s.timeout_seconds for s in stages_added.stages] == [300]
