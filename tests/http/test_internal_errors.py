"""A failure of the API's own is answered 500 without details and logged with its traceback; a refused request
(4xx) is not logged as an error."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.http.conftest import AppClient


class BrokenViews:
    """Read models that fail on every read, as a bug would."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the views broke reading {name}")


async def test_an_internal_error_is_a_bare_500_and_a_logged_traceback(
    app_client: AppClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with app_client(views=BrokenViews()) as http:
        failed = await http.get("/jobs")
        refused = await http.post("/build", content=b"{not json", headers={"content-type": "application/json"})
    assert failed.status_code == 500
    assert failed.json() == {"status_code": 500, "detail": "Internal Server Error"}
    assert refused.status_code == 400
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "hades.http.app"]
    assert any("GET /jobs failed" in r.getMessage() for r in errors)
    assert any(r.exc_info and "the views broke" in str(r.exc_info[1]) for r in errors)
    assert not any("/build" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
