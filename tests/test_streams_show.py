"""``hades streams show`` through the real entry point against a real nats-server: a healthy server exits 0; a
setting changed behind Hades's back, a missing consumer or stream exits 1 naming each and the fix; ``streams
apply`` puts it right; no NATS exits 3."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from hades.adapters.nats.connection import connect
from hades.adapters.nats.pools import PRIORITY_ORDER, Pools, queue_consumer, queue_subjects
from hades.adapters.nats.server import EmbeddedNats
from hades.adapters.nats.topology import EVENTS_STREAM, LOGS_STREAM
from tests.conftest import free_port


def hades(tmp_path: Path, nats_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m hades.cli ARGS`` with only ``NATS_URL`` set, in an empty folder (no .env)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_", "DOCKER_"))}
    env["NATS_URL"] = nats_url
    command = [sys.executable, "-m", "hades.cli", *args]
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


async def test_a_healthy_server_matches(js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path) -> None:
    shown = hades(tmp_path, fresh_nats.url, "streams", "show")

    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "the server matches streams.yaml" in shown.stdout
    for name in (
        "stream HADES_EVENTS",
        "bucket HADES_WORKERS",
        "object store HADES_ARTIFACTS",
        "HADES_EVENTS/scheduler",
    ):
        assert name in shown.stdout
    as_json = json.loads(hades(tmp_path, fresh_nats.url, "streams", "show", "--json").stdout)
    assert as_json["ok"] is True and as_json["problems"] == []
    events = next(store for store in as_json["stores"] if store["name"] == "HADES_EVENTS")
    assert events["replicas"] == 1 and events["storage"] == "file" and events["missing"] is False
    scheduler = next(consumer for consumer in as_json["consumers"] if consumer["name"] == "scheduler")
    assert {"pending", "ack_pending", "redelivered", "waiting"} <= scheduler.keys()


async def test_changes_behind_hades_back_are_named_with_the_fix(
    js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path
) -> None:
    logs = (await js.stream_info(LOGS_STREAM)).config
    logs.max_age = 60
    await js.update_stream(config=logs)
    workers = (await js.stream_info("KV_HADES_WORKERS")).config
    workers.max_age = 30  # the heartbeat TTL: executors would be taken for lost three times later
    await js.update_stream(config=workers)
    await js.delete_consumer("HADES_EVENTS", "notifier")

    shown = hades(tmp_path, fresh_nats.url, "streams", "show")

    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "stream HADES_LOGS: max_age is 60 on the server, 604800 in streams.yaml" in shown.stdout
    assert "bucket HADES_WORKERS: max_age is 30 on the server, 10 in streams.yaml" in shown.stdout
    assert "consumer HADES_EVENTS/notifier is missing" in shown.stdout
    assert "fix: run `hades streams apply`" in shown.stdout
    as_json = json.loads(hades(tmp_path, fresh_nats.url, "streams", "show", "--json").stdout)
    assert as_json["ok"] is False and len(as_json["problems"]) == 3 and "hades streams apply" in as_json["fix"]

    applied = hades(tmp_path, fresh_nats.url, "streams", "apply", "--json")
    assert applied.returncode == 0, applied.stderr
    report = json.loads(applied.stdout)
    assert "bucket HADES_WORKERS" in report["updated"] and "consumer HADES_EVENTS/notifier" in report["created"]
    assert hades(tmp_path, fresh_nats.url, "streams", "show").returncode == 0


async def test_a_missing_stream_is_named(js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path) -> None:
    await js.delete_stream(LOGS_STREAM)

    shown = hades(tmp_path, fresh_nats.url, "streams", "show")

    assert shown.returncode == 1
    assert "stream HADES_LOGS is missing" in shown.stdout and "hades streams apply" in shown.stdout


async def test_every_consumer_is_shown_past_the_first_page(
    js: JetStreamContext, fresh_nats: EmbeddedNats, tmp_path: Path
) -> None:
    """The server lists 256 consumers per request; 100 executor pools make 300 consumers besides the declared ones."""
    pools = [f"{number:012x}" for number in range(100)]
    queues = [
        (queue_consumer(priority, pool), queue_subjects(priority, pool))
        for pool in pools
        for priority in PRIORITY_ORDER
    ]
    made = {name for name, _ in queues}
    await asyncio.gather(
        *(
            js.add_consumer(EVENTS_STREAM, ConsumerConfig(durable_name=name, filter_subject=subjects))
            for name, subjects in queues
        )
    )

    as_json = json.loads(hades(tmp_path, fresh_nats.url, "streams", "show", "--json").stdout)

    shown = {consumer["name"] for consumer in as_json["consumers"] if not consumer["declared"]}
    assert shown == made
    assert as_json["ok"] is True  # the declared ones are all found too, none reported missing
    nc = await connect(fresh_nats.url)
    try:
        assert sorted(await Pools(nc).queues()) == pools
    finally:
        await nc.close()


def test_no_nats_exits_3_naming_it(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"

    shown = hades(tmp_path, url, "streams", "show")

    assert shown.returncode == 3
    assert f"cannot connect to NATS at {url}" in shown.stderr and "set NATS_URL" in shown.stderr
