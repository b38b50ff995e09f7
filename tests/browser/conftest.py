"""Headless Chromium for the dashboard's end-to-end tests: Debian's browser, driven by playwright, nothing downloaded.

Tests marked ``browser`` skip on a laptop without ``/usr/bin/chromium`` (or without playwright) and fail under
``CI=true``, as the ``docker`` marker does.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium (skips without /usr/bin/chromium, fails under CI=true)"
    )


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(autouse=True)
def _browser_marker(request: pytest.FixtureRequest) -> None:
    """Skip (laptop) or fail (``CI=true``) a ``browser`` test when there is no browser to drive."""
    if request.node.get_closest_marker("browser") is None:
        return
    missing = _missing()
    if missing is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
async def chromium() -> AsyncIterator[Any]:
    """One browser for the module; each test opens its own context (cookies, storage) with ``page``."""
    if _missing() is not None:
        pytest.skip(_missing() or "")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
async def browser_page(chromium: Any, start_hades: Any) -> AsyncIterator[tuple[Any, list[str]]]:
    """A page in a fresh context (cookies, storage), and the problems it reported: page errors and CSP violations.

    It depends on ``start_hades`` so it closes first: no stream of the page is still open when Hades stops.
    """
    context = await chromium.new_context(viewport={"width": 1360, "height": 900})
    page = await context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: _csp_violation(message.text, problems))
    try:
        yield page, problems
    finally:
        await context.close()


def _csp_violation(text: str, problems: list[str]) -> None:
    if "Content Security Policy" in text:
        problems.append(f"console: {text}")


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots and figures go: ``$HADES_TEST_ARTIFACTS/dashboard`` (default ``test-artifacts``)."""
    folder = Path(os.environ.get("HADES_TEST_ARTIFACTS", "test-artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
