"""The dashboard in a real browser against a real Hades: log in, watch a job go Queued → Running → Succeeded with
its logs arriving live, see its secrets masked, cancel another, and keep a 10,000-row table fast.

Jobs run on the process executor (``/bin/sh -c`` on this machine), so the test decides when a step may finish by
creating a marker file. Screenshots and the measured latencies go to ``$HADES_TEST_ARTIFACTS/dashboard``.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import string
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import bcrypt
import httpx
import pytest
from playwright.async_api import Page, Route, expect

from hades.runtime import Roles
from tests.conftest import RunningHades, StartHades

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

USER = "admin"
PASSWORD = "correct horse battery staple"
VERSION = "1.4.2"
AUTH_KEY = "browser-test-key"
SECRET_ALPHABET = string.ascii_letters + string.digits


def dashboard_env() -> dict[str, str]:
    return {
        "DASHBOARD_USERNAME": USER,
        "DASHBOARD_PASSWORD_HASH": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode(),
        "DASHBOARD_SESSION_SECRET": "".join(secrets.choice(SECRET_ALPHABET) for _ in range(40)),
        "DASHBOARD_COOKIE_INSECURE": "true",
        "HADES_VERSION": VERSION,
        "HADES_EXECUTOR": "process",
    }


async def start_api(start_hades: StartHades) -> RunningHades:
    return await start_hades(Roles(api=True, scheduler=True), **dashboard_env())


async def start_executor(start_hades: StartHades, tmp_path: Path) -> RunningHades:
    return await start_hades(
        Roles(executor=True), HADES_EXECUTOR="process", HADES_PROCESS_WORKSPACES=str(tmp_path / "work"), CONCURRENCY=4
    )


def waiting_job(name: str, marker: Path, metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """One step that prints a line, waits for ``marker``, prints another and exits 0."""
    script = f"echo 'first line of {name}'; while [ ! -f {marker} ]; do sleep 0.05; done; echo 'second line of {name}'"
    return {
        "name": name,
        "metadata": metadata or {},
        "steps": [{"id": 1, "name": "wait for the marker", "image": "alpine:latest", "script": script}],
    }


async def log_in(page: Page, password: str = PASSWORD) -> None:
    await page.get_by_test_id("login-username").fill(USER)
    await page.get_by_test_id("login-password").fill(password)
    await page.get_by_test_id("login-submit").click()


async def assert_no_secrets(page: Page, *values: str) -> None:
    """None of ``values`` is anywhere in the page: not in its markup, not in its visible text."""
    html, text = await page.content(), await page.locator("body").inner_text()
    for value in values:
        assert value not in html
        assert value not in text


async def event_time(hades: RunningHades, job_id: str, kind: str) -> float:
    """When the job's ``kind`` event was appended (unix seconds), from its history."""
    events = (await hades.client.get(f"/jobs/{job_id}/events")).json()["events"]
    at = next(row["at"] for row in events if row["type"] == kind)
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


async def test_login_errors_version_theme_and_logout(
    browser_page: tuple[Page, list[str]], start_hades: StartHades
) -> None:
    hades = await start_api(start_hades)
    page, problems = browser_page

    await page.goto(f"{hades.url}/jobs")
    await expect(page).to_have_url(re.compile(r"/login\?next=%2Fjobs$"))
    await log_in(page, password="not the password")
    await expect(page.get_by_test_id("login-error")).to_have_text("Invalid username or password.")

    await log_in(page)
    await expect(page).to_have_url(f"{hades.url}/jobs")  # back where it was going
    await expect(page.get_by_test_id("version")).to_have_text(f"v{VERSION}")
    await expect(page.get_by_test_id("current-user")).to_have_text(USER)
    await expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-state", "live", timeout=10_000)

    theme = await page.evaluate("document.documentElement.dataset.theme")
    await page.get_by_test_id("theme-toggle").click()
    flipped = "dark" if theme == "light" else "light"
    await expect(page.locator("html")).to_have_attribute("data-theme", flipped)
    await page.reload()
    await expect(page.locator("html")).to_have_attribute("data-theme", flipped)  # remembered

    await page.get_by_test_id("nav-overview").click()
    await expect(page.get_by_test_id("metric-queued")).to_be_visible()
    await page.context.clear_cookies()  # the session is gone: the next API call answers 401
    await page.get_by_test_id("nav-jobs").click()
    await expect(page).to_have_url(re.compile(r"/login\?next=%2Fjobs$"))
    await log_in(page)
    await expect(page).to_have_url(f"{hades.url}/jobs")

    await page.get_by_test_id("logout").click()
    await expect(page).to_have_url(f"{hades.url}/login")
    await page.goto(f"{hades.url}/")
    await expect(page).to_have_url(re.compile(r"/login"))  # the cookie is gone
    assert problems == []


async def test_a_job_runs_live_in_the_dashboard(
    browser_page: tuple[Page, list[str]], start_hades: StartHades, tmp_path: Path, artifacts: Path
) -> None:
    hades = await start_api(start_hades)
    page, problems = browser_page
    suffix = "".join(secrets.choice(SECRET_ALPHABET) for _ in range(8))
    github_token = "ghp_" + "".join(secrets.choice(SECRET_ALPHABET) for _ in range(36))
    deploy_password = f"hunter2-{suffix}"
    metadata = {"GITHUB_TOKEN": github_token, "DEPLOY_URL": f"https://bot:{deploy_password}@example.com/x"}
    name = f"dashboard-e2e-{suffix}"
    marker = tmp_path / "go"

    await page.goto(f"{hades.url}/")
    await expect(page).to_have_url(re.compile(r"/login"))
    await log_in(page)
    await expect(page.get_by_test_id("metric-queued")).to_be_visible()
    await expect(page.get_by_test_id("live-indicator")).to_have_attribute("data-state", "live", timeout=10_000)
    await page.evaluate("window.__noReload = true")

    job_id = await hades.submit(waiting_job(name, marker, metadata))
    recent = page.locator(f'[data-testid="recent-row"][data-job-id="{job_id}"]')
    await expect(recent).to_be_visible(timeout=10_000)  # pushed by /api/stream, no reload
    await expect(recent.get_by_test_id("job-status")).to_have_text("Queued")
    await expect(page.get_by_test_id("metric-queued")).not_to_have_text("0")  # the counts follow the job frames
    await page.screenshot(path=str(artifacts / "overview.png"), full_page=True)

    await page.get_by_test_id("nav-jobs").click()
    row = page.locator(f'[data-testid="jobs-row"][data-job-id="{job_id}"]')
    await expect(row).to_be_visible()
    await row.get_by_test_id("job-status").click()
    await expect(page).to_have_url(f"{hades.url}/jobs/{job_id}#steps")
    assert await page.evaluate("window.__noReload") is True  # client-side navigation all along

    status = page.locator("main").get_by_test_id("job-status").first
    await expect(page.get_by_test_id("job-name")).to_have_text(name)
    await expect(status).to_have_text("Queued")
    await expect(page.get_by_test_id("cancel-button")).to_be_visible()

    await page.get_by_test_id("tab-metadata").click()
    await expect(page.get_by_test_id("redacted-chip")).to_have_count(2)
    await assert_no_secrets(page, github_token, deploy_password)
    await page.get_by_test_id("tab-logs").click()
    await expect(page.get_by_test_id("logs-warning")).to_have_text(
        "Logs are shown verbatim and may contain secrets Hades does not scrub."
    )

    await start_executor(start_hades, tmp_path)
    await expect(status).to_have_text("Running", timeout=20_000)
    running_seen = time.time()
    lines = page.get_by_test_id("log-line")
    await expect(lines.filter(has_text=f"first line of {name}")).to_have_count(1, timeout=15_000)
    await expect(page.get_by_test_id("logs-state")).to_have_attribute("data-mode", "live")

    marker.touch()
    await expect(status).to_have_text("Succeeded", timeout=20_000)
    succeeded_seen = time.time()
    await expect(lines.filter(has_text=f"second line of {name}")).to_have_count(1, timeout=15_000)
    await expect(lines).to_have_count(2)  # the backlog and the live tail, de-duplicated
    await expect(page.get_by_test_id("cancel-button")).to_be_hidden()
    await expect(page.get_by_test_id("job-finished-at")).not_to_have_text("—")
    await page.screenshot(path=str(artifacts / "job.png"), full_page=True)

    latency = {
        "running_ms": round(1000 * (running_seen - await event_time(hades, job_id, "started")), 1),
        "succeeded_ms": round(1000 * (succeeded_seen - await event_time(hades, job_id, "succeeded")), 1),
    }
    print(f"\nstatus change, event appended -> shown in the page: {latency}")
    (artifacts / "latency.json").write_text(json.dumps(latency, indent=2) + "\n")
    assert all(0 <= ms < 5000 for ms in latency.values()), latency

    await page.get_by_test_id("tab-metadata").click()
    await expect(page.get_by_test_id("redacted-chip").first).to_be_visible()
    await assert_no_secrets(page, github_token, deploy_password)

    await page.get_by_test_id("tab-timeline").click()
    await expect(page.locator('[data-testid="timeline-event"][data-type="succeeded"]')).to_have_count(1)
    queued_at = await page.locator('[data-testid="timeline-event"][data-type="queued"]').first.get_attribute(
        "data-index"
    )
    await page.get_by_test_id("timeline-scrubber").fill(str(queued_at))
    await expect(page.get_by_test_id("timeline-state-status")).to_have_text("Queued")  # the past, via ?at=
    await page.screenshot(path=str(artifacts / "job-timeline.png"), full_page=True)

    await page.get_by_test_id("tab-timing").click()
    await expect(page.locator('[data-testid="timing-bar"][data-phase="run"]')).to_have_count(1)
    await expect(page.get_by_test_id("timing-overhead")).to_contain_text("%")
    assert problems == []


async def test_cancel_stops_a_running_job(
    browser_page: tuple[Page, list[str]], start_hades: StartHades, tmp_path: Path
) -> None:
    hades = await start_api(start_hades)
    await start_executor(start_hades, tmp_path)
    page, problems = browser_page
    job_id = await hades.submit(waiting_job("to be cancelled", tmp_path / "never"))

    await page.goto(f"{hades.url}/jobs/{job_id}")  # a deep link: the API serves the app for it
    await expect(page).to_have_url(re.compile(r"/login"))
    await log_in(page)
    await expect(page).to_have_url(re.compile(rf"/jobs/{job_id}"))
    status = page.locator("main").get_by_test_id("job-status").first
    await expect(status).to_have_text("Running", timeout=20_000)

    await page.get_by_test_id("cancel-button").click()
    await expect(page.get_by_test_id("cancel-dialog")).to_be_visible()
    await page.get_by_test_id("cancel-reason").fill("stopped by the browser test")
    await page.get_by_test_id("cancel-confirm").click()
    await expect(status).to_have_text("Stopped", timeout=20_000)
    await expect(page.get_by_test_id("cancel-button")).to_be_hidden()
    await expect(page.get_by_test_id("job-reason")).to_have_text(
        f"cancelled by dashboard:{USER}: stopped by the browser test"
    )
    await page.get_by_test_id("tab-timeline").click()  # the reason given is kept with the request
    cancel_requested = page.locator('[data-testid="timeline-event"][data-type="cancel_requested"]')
    await expect(cancel_requested).to_contain_text("stopped by the browser test")
    detail = (await hades.client.get(f"/jobs/{job_id}")).json()
    assert detail["status"] == "Stopped"
    assert detail["cancel_requested_by"] == f"dashboard:{USER}"

    await page.get_by_test_id("nav-jobs").click()
    row = page.locator(f'[data-testid="jobs-row"][data-job-id="{job_id}"]')
    await page.get_by_test_id("filter-Stopped").click()
    await expect(page).to_have_url(f"{hades.url}/jobs?status=Stopped")
    await expect(row).to_be_visible()
    await page.get_by_test_id("filter-Running").click()
    await expect(page.get_by_test_id("filter-Running")).to_have_attribute("aria-pressed", "true")
    await expect(row).to_have_count(0)
    assert problems == []


async def test_a_job_page_reloads_and_opens_from_a_link_with_auth_key_set(
    browser_page: tuple[Page, list[str]], start_hades: StartHades
) -> None:
    """``/jobs/<id>`` is also the Basic-auth-guarded API route: the browser gets the page, never a 401 or a prompt."""
    hades = await start_hades(Roles(api=True, scheduler=True), AUTH_KEY=AUTH_KEY, **dashboard_env())
    hades.client.auth = httpx.BasicAuth("hades", AUTH_KEY)
    job_id = await hades.submit({"name": "deep link", "steps": [{"id": 1, "image": "alpine:3", "script": "true"}]})
    page, problems = browser_page
    refused: list[str] = []
    page.on("response", lambda response: refused.append(response.url) if response.status == 401 else None)

    opened = await page.goto(f"{hades.url}/jobs/{job_id}")  # a link from elsewhere, before logging in
    assert opened is not None and opened.status == 200
    await expect(page).to_have_url(re.compile(r"/login\?next="))
    await log_in(page)
    await expect(page).to_have_url(f"{hades.url}/jobs/{job_id}#steps")
    await expect(page.get_by_test_id("job-name")).to_have_text("deep link")

    refused.clear()  # the 401 of /api/session before the login was the app's own check
    reloaded = await page.reload()
    assert reloaded is not None and reloaded.status == 200
    assert reloaded.headers["content-type"].startswith("text/html")
    await expect(page).to_have_url(f"{hades.url}/jobs/{job_id}#steps")
    await expect(page.get_by_test_id("job-name")).to_have_text("deep link")

    await page.get_by_test_id("nav-jobs").click()
    reloaded = await page.reload()
    assert reloaded is not None and reloaded.status == 200
    await expect(page.locator(f'[data-testid="jobs-row"][data-job-id="{job_id}"]')).to_be_visible()
    assert refused == []
    assert problems == []

    async with httpx.AsyncClient() as client:  # an API client still meets the challenge
        api = await client.get(f"{hades.url}/jobs/{job_id}")
    assert api.status_code == 401
    assert api.headers["www-authenticate"].startswith("Basic")


def synthetic_jobs(count: int) -> list[dict[str, Any]]:
    statuses = ["Queued", "Running", "Succeeded", "Failed", "Stopped"]
    return [
        {
            "id": f"00000000-0000-4000-8000-{i:012d}",
            "name": f"synthetic job {i:05d}",
            "priority": "high",
            "status": statuses[i % 5],
            "stepCount": 1,
            "queuedAt": f"2026-01-01T00:{(count - i) // 600 % 60:02d}:{(count - i) // 10 % 60:02d}Z",
            "attempt": 1,
        }
        for i in range(count)
    ]


def sse(*frames: dict[str, Any], retry_ms: int | None = None) -> str:
    """An ``/api/stream`` body: optionally the reconnection delay, then one ``data:`` line per frame."""
    head = f"retry: {retry_ms}\n\n" if retry_ms is not None else ""
    return head + "".join(f"data: {json.dumps(frame, separators=(',', ':'))}\n\n" for frame in frames)


async def test_ten_thousand_jobs_stay_fast_under_a_burst_of_frames(
    browser_page: tuple[Page, list[str]], start_hades: StartHades
) -> None:
    """10,000 rows, only those in view in the DOM; then 10,000 job frames at once, applied in one batch.

    Both feeds are synthetic (routed by the browser): the list, and ``/api/stream`` whose first connection
    sends one metrics frame and asks to reconnect at once, whose second sends the burst when the test says so.
    """
    hades = await start_api(start_hades)
    page, problems = browser_page
    before = synthetic_jobs(10_000)
    after = [{**job, "status": "Failed", "reason": f"burst {i}"} for i, job in enumerate(before)]
    bodies = {False: json.dumps({"jobs": before, "total": 10_000}), True: json.dumps({"jobs": after, "total": 10_000})}
    metrics = {"statusCounts": {}, "queueDepth": {"total": 0, "byPriority": {}}, "durations": {"count": 0}}
    burst = sse(*({"type": "job", "job": job} for job in after))
    connections: list[float] = []
    burst_wanted, burst_sent = asyncio.Event(), asyncio.Event()

    async def job_list(route: Route) -> None:
        await route.fulfill(content_type="application/json", body=bodies[burst_sent.is_set()])

    async def stream(route: Route) -> None:
        connections.append(time.time())
        if len(connections) == 1:
            body = sse({"type": "metrics", "job": {"id": "", "status": ""}, "metrics": metrics}, retry_ms=50)
            await route.fulfill(content_type="text/event-stream", body=body)
        elif len(connections) == 2:
            await asyncio.wait_for(burst_wanted.wait(), 60)
            connections[-1] = time.time()
            burst_sent.set()  # from now on the list is the one after the burst, as a refetch would find it
            await route.fulfill(content_type="text/event-stream", body=burst)
        else:
            await route.fulfill(status=204)  # "stop reconnecting"

    await page.route(re.compile(r"/api/jobs\?limit=10000$"), job_list)
    await page.route(re.compile(r"/api/stream$"), stream)
    await page.goto(f"{hades.url}/login")
    await log_in(page)
    await expect(page.get_by_test_id("metric-queued")).to_be_visible()

    started = time.time()
    await page.get_by_test_id("nav-jobs").click()
    await expect(page.get_by_test_id("jobs-count")).to_have_text("10,000 jobs")
    first = page.locator(f'[data-job-id="{before[0]["id"]}"]')
    await expect(first).to_be_visible()
    shown = time.time() - started
    await expect(first.get_by_test_id("job-status")).to_have_text("Queued")
    rows = await page.get_by_test_id("jobs-row").count()
    assert rows < 100

    burst_wanted.set()
    await expect(first.get_by_test_id("job-status")).to_have_text("Failed", timeout=20_000)
    await expect(first).to_contain_text("burst 0")
    applied = time.time() - connections[1]
    await expect(page.locator('[data-testid="jobs-row"]:not([data-status="Failed"])')).to_have_count(0)
    await expect(page.get_by_test_id("jobs-count")).to_have_text("10,000 jobs")
    print(
        f"\n10,000 jobs: first rows {1000 * shown:.0f} ms after the click with {rows} rows in the DOM; "
        f"a burst of 10,000 job frames shown {1000 * applied:.0f} ms after it was sent"
    )

    await page.locator(".vscroll").evaluate("element => { element.scrollTop = element.scrollHeight; }")
    last = page.locator(f'[data-job-id="{before[-1]["id"]}"]')
    await expect(last).to_be_visible()
    await expect(last).to_contain_text("burst 9999")
    assert await page.get_by_test_id("jobs-row").count() < 100
    assert problems == []
