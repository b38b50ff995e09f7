"""Bugs the fuzzers found, each pinned by the request that showed it."""

from __future__ import annotations

from tests.http.conftest import AppClient


async def test_a_junk_at_is_a_plain_text_400_not_text_labelled_json(app_client: AppClient) -> None:
    # Found by Hypothesis: the message was sent as ``application/json`` but was not JSON.
    async with app_client() as http:
        response = await http.get("/jobs/00000000-0000-4000-8000-000000000000", params={"at": "\x00"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "invalid at: '\\x00' is not an ISO 8601 time with a zone"


async def test_followed_logs_of_an_unknown_job_are_a_documented_event_stream(app_client: AppClient) -> None:
    # Found by schemathesis: ``?follow=true`` answers text/event-stream, which the document did not say.
    async with app_client() as http:
        schema = (await http.get("/schema/openapi.json")).json()
        response = await http.get("/jobs/not-a-job/logs", params={"follow": "true"})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert 'data: {"error": "job not found: not-a-job"}' in response.text
    documented = schema["paths"]["/jobs/{job_id}/logs"]["get"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= documented.keys()
