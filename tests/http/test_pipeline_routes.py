"""The pipeline parts of the API in-process (the app over real NATS stores): ``/build``'s stage limit and input
policy, and ``POST /jobs/{id}/stages``'s refusals before any stage runs."""

from __future__ import annotations

from typing import Any

from hades.adapters.nats.pipeline_tokens import pipeline_token
from hades.core.urls import CallbackPolicy
from tests.http.conftest import AppClient

KEY = b"k" * 32


def stage(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [{"id": 1, "image": "-", "script": "true"}], **fields}


async def test_build_refuses_more_stages_than_the_limit_and_refused_input_hosts(app_client: AppClient) -> None:
    async with app_client(max_pipeline_stages=2) as http:
        over = await http.post("/build", json={"name": "p", "stages": [stage("a"), stage("b"), stage("c")]})
        assert over.status_code == 400
        assert over.text == "Invalid stages: a pipeline has at most 2 stages (MAX_PIPELINE_STAGES), not 3"
        assert (await http.post("/build", json={"name": "p", "stages": [stage("a"), stage("b")]})).status_code == 200
    async with app_client(callbacks=CallbackPolicy.parse("", True)) as http:
        body = {"name": "p", "stages": [stage("a", inputs=["http://127.0.0.1/tool"])]}
        refused = await http.post("/build", json=body)
        assert refused.status_code == 400
        assert refused.text == (
            "Invalid stages[0].inputs[0]: input URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)"
        )


async def test_adding_stages_needs_the_pipelines_own_token(app_client: AppClient) -> None:
    async with app_client(pipeline_token_key=KEY) as http:
        answer = await http.post("/build", json={"name": "p", "stages": [stage("a")]})
        pid = answer.json()["job_id"]
        other = (await http.post("/build", json={"name": "q", "stages": [stage("a")]})).json()["job_id"]
        url, body = f"/jobs/{pid}/stages", {"stages": [stage("b")]}
        for headers in ({}, {"Authorization": f"Bearer {pipeline_token(KEY, other)}"}, {"Authorization": "Basic x"}):
            refused = await http.post(url, json=body, headers=headers)
            assert refused.status_code == 401, headers
            assert refused.json()["error"].startswith("a pipeline token is required")
        assert (await http.post("/jobs/not-a-uuid/stages", json=body)).status_code == 401
        auth = {"Authorization": f"Bearer {pipeline_token(KEY, pid)}"}
        bad = await http.post(url, content=b"{", headers=auth)
        assert bad.status_code == 400 and bad.json()["error"].startswith("Invalid JSON body: not JSON")
        added = await http.post(url, json={**body, "stage": "a"}, headers=auth)
        assert added.status_code == 202 and added.json() == {"job_id": pid, "stages": ["b"], "status": "Queued"}
        events = (await http.get(f"/jobs/{pid}/events")).json()["events"]
        assert [e["type"] for e in events] == ["submitted", "stages_added"] and events[1]["by"] == "stage:a"
        view = (await http.get(f"/jobs/{pid}")).json()
        assert [(s["name"], s["status"], s["needs"]) for s in view["stages"]] == [
            ("a", "Pending", []),
            ("b", "Pending", ["a"]),
        ]
    async with app_client() as http:  # no key: every token is refused
        assert (await http.post(url, json=body, headers=auth)).status_code == 401
