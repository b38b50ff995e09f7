"""The app's OpenAPI document: served at ``/schema``, checked in as ``docs/openapi.json``, and true to the routes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hades.http.app import API_ROUTES
from hades.http.openapi import document, render
from tests.http.conftest import AppClient

CHECKED_IN = Path(__file__).parents[2] / "docs" / "openapi.json"
REGENERATE = ".venv/bin/python -m hades.http.openapi > docs/openapi.json"


def test_the_checked_in_document_is_the_apps() -> None:
    assert CHECKED_IN.read_text() == render(document()), f"docs/openapi.json is stale: run `{REGENERATE}`"


async def test_the_running_app_serves_the_checked_in_document(app_client: AppClient) -> None:
    async with app_client() as http:
        for path in ("/schema", "/schema/openapi.json"):
            response = await http.get(path)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/vnd.oai.openapi+json")
            assert response.json() == json.loads(CHECKED_IN.read_text()), f"{path}: run `{REGENERATE}`"


async def test_the_swagger_ui_is_served_only_in_debug(app_client: AppClient) -> None:
    async with app_client() as http:
        assert "swagger" not in (await http.get("/schema", headers={"accept": "text/html"})).text.lower()
    async with app_client({"debug": True}) as http:
        page = await http.get("/schema")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "swagger-ui" in page.text
        assert "content-security-policy" not in page.headers  # its scripts come from a CDN, as Go skips /swagger
        assert page.headers["x-frame-options"] == "DENY"
        assert (await http.get("/schema/openapi.json")).json() == json.loads(CHECKED_IN.read_text())


def _operation(method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = document()["paths"][path][method]
    return operation


def test_build_reads_the_job_payload_and_documents_the_go_answers() -> None:
    build = _operation("post", "/build")
    body = build["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["name"]
    fields = {"name", "steps", "callback_url", "status_callback_url", "timeout_seconds", "priority"}
    assert fields <= body["properties"].keys()
    assert body["properties"]["steps"]["items"]["properties"]["memory_limit"]["type"] == "string"
    answers = build["responses"]
    assert answers.keys() == {"200", "400", "401", "413", "422", "500"}
    accepted = answers["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(document()["components"]["schemas"][accepted]["required"]) == {"message", "job_id"}
    for status in ("400", "413", "422", "500"):
        assert list(answers[status]["content"]) == ["text/plain"]
    assert build["security"] == [{"basic": []}]
    assert [(p["name"], p["in"], p["required"]) for p in build["parameters"]] == [("Idempotency-Key", "header", False)]


def test_every_api_route_is_documented_with_its_success_answer() -> None:
    paths = document()["paths"]
    for handler in API_ROUTES:
        for path in handler.paths:
            documented = path.replace(":str", "").replace(":path", "")
            for method in handler.http_methods:
                operation = paths[documented][method.lower()]
                success = str(handler.status_code)
                assert success in operation["responses"], (method, documented)
                assert operation["responses"][success]["description"], (method, documented)
