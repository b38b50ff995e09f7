"""No secret in any log line Hades itself writes: jobs carrying secrets in metadata, scripts and callback URLs run
to the end (webhook and log forwarding included) on a Hades with AUTH_KEY, a dashboard and a webhook secret, every
``hades`` logger captured at DEBUG with DEBUG=true.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.support.receiver import receiving

AUTH_KEY = "auth-key-0c1f9e8d7b6a"
SECRETS = {
    "auth key": AUTH_KEY,
    "job metadata": "job-meta-secret-5e4d3c",
    "step metadata": "step-meta-secret-2b1a09",
    "script": "script-secret-88f7e6d5",
    "callback password": "cb-password-a1b2c3d4",
    "status callback password": "hook-password-e5f6a7b8",
    "dashboard password": "dashboard-password-9c8b7a",
    "dashboard session secret": "dashboard-session-secret-" + "z" * 16,
    "webhook secret": "webhook-signing-secret-4f3e2d",
}


async def test_secrets_never_reach_a_hades_log_record(
    start_hades: StartHades, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="httpx")  # `hades` quiets it; an embedder may not (and a test may have)
    password_hash = bcrypt.hashpw(SECRETS["dashboard password"].encode(), bcrypt.gensalt(rounds=4)).decode()
    async with receiving(500, 200) as receiver:
        host = receiver.url.removeprefix("http://")
        hades = await start_hades(
            Roles(api=True, scheduler=True, executor=True, notifier=True),
            DEBUG="true",
            AUTH_KEY=AUTH_KEY,
            HADES_EXECUTOR="process",
            HADES_PROCESS_WORKSPACES=str(tmp_path),
            DASHBOARD_USERNAME="admin",
            DASHBOARD_PASSWORD_HASH=password_hash,
            DASHBOARD_SESSION_SECRET=SECRETS["dashboard session secret"],
            DASHBOARD_COOKIE_INSECURE="true",
            WEBHOOK_SECRET=SECRETS["webhook secret"],
            WEBHOOK_BACKOFF_BASE="0",
            LOG_FORWARD_BACKOFF_BASE="0",
        )
        hades.client.auth = ("hades", AUTH_KEY)
        login = {"username": "admin", "password": SECRETS["dashboard password"]}
        assert (await hades.client.post("/api/login", json=login)).status_code == 200
        assert (await hades.client.post("/api/login", json={**login, "password": "wrong"})).status_code == 401
        job: dict[str, Any] = {
            "name": "secretive",
            "metadata": {"API_TOKEN": SECRETS["job metadata"]},
            "steps": [
                {
                    "id": 1,
                    "image": "ignored",
                    "script": f"export DEPLOY_TOKEN={SECRETS['script']}; exit 3",
                    "metadata": {"DB_PASSWORD": SECRETS["step metadata"]},
                }
            ],
            "callback_url": f"http://user:{SECRETS['callback password']}@{host}/logs",
            "status_callback_url": f"http://user:{SECRETS['status callback password']}@{host}/hook",
        }
        job_id = await hades.submit(job)
        assert (await hades.wait_terminal(job_id))["status"] == "Failed"

        async def delivered() -> bool:
            rows = (await hades.client.get(f"/jobs/{job_id}/deliveries")).json()["deliveries"]
            return {row["kind"] for row in rows if row["ok"]} == {"logs", "webhook"}

        await eventually(delivered)
        await hades.stop()

    captured = {record.name for record in caplog.records}
    # The capture saw both Hades's own lines and the HTTP library's line of each request (which names the URL).
    assert {"hades.timing", "hades.workers.jobs", "httpx"} <= captured, captured
    for record in caplog.records:  # the libraries Hades drives (httpx, uvicorn, nats-py) included
        line = record.getMessage() + (record.exc_text or "")
        for what, secret in SECRETS.items():
            assert secret not in line, f"{what} in a {record.name} record: {line}"
