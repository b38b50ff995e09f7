"""A step's log batches survive a NATS server that dies between taking a batch and answering it.

nats-py's ``publish_async`` future never resolves when its reply is lost; a writer that awaited it without a bound
hung its step forever (seen in the chaos suite: jobs stuck after ``step_started`` once a single-node NATS was
SIGKILLed). The server is frozen (SIGSTOP) so the batch sits unanswered in its socket, then killed and started
again on the same store: the writer must resend and close, and the log must hold every line once.
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hades.adapters.nats import log_store
from hades.adapters.nats.connection import connect
from hades.adapters.nats.log_store import NatsLogStore, StepLogWriter
from hades.adapters.nats.server import start_nats
from hades.adapters.nats.topology import apply, load_topology
from tests.conftest import eventually, free_port


async def test_a_batch_whose_ack_was_lost_is_sent_again(tmp_path: Path) -> None:
    port = free_port()
    server = start_nats(tmp_path / "nats", port=port)
    try:
        nc = await connect(server.url)
        try:
            await apply(nc.jetstream(), load_topology())
            writer = StepLogWriter(nc, "job-1", 1, publish_timeout=1.0)
            await writer.open("container-1")
            os.kill(server.process.pid, signal.SIGSTOP)  # takes the batch into its socket, never answers
            for n in range(3):
                await writer.write("stdout", datetime.now(UTC), f"line {n}")
            await writer.flush()
            server.process.kill()
            server.process.wait()
            server = start_nats(tmp_path / "nats", port=port)
            async with asyncio.timeout(30):  # unbounded before the fix
                last_seq = await writer.close()
            assert last_seq is not None
            lines = [entry.message for log in await NatsLogStore(nc).read("job-1") for entry in log.logs or []]
            assert lines == ["line 0", "line 1", "line 2"]
        finally:
            await nc.close()
    finally:
        server.process.kill()
        server.process.wait()


async def test_a_writer_that_gives_up_frees_its_places_in_the_shared_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_store, "_OUTAGE_PATIENCE", 0.5)
    server = start_nats(tmp_path / "nats", port=free_port())
    try:
        nc = await connect(server.url)
        try:
            await apply(nc.jetstream(), load_topology())
            shared = nc.jetstream(timeout=0.5)
            writer = StepLogWriter(nc, "job-2", 1, publish_timeout=0.5, publisher=shared)
            os.kill(server.process.pid, signal.SIGSTOP)  # no batch is ever answered
            await writer.open("container-1")
            await writer.write("stdout", datetime.now(UTC), "line")
            await writer.flush()

            with pytest.raises(TimeoutError):
                await writer.close()

            async def released() -> bool:  # the cancelled acks' callbacks run on the loop's next turn
                return shared.publish_async_pending() == 0

            assert await eventually(released, timeout=5)  # the second batch no longer holds a place
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            await nc.close()
    finally:
        server.process.kill()
        server.process.wait()
