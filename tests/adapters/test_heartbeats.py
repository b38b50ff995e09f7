"""The live executors as the scheduler sees them: every one that renews its key, none that said goodbye, even while
keys are being renewed at the moment of the listing (a renewal replaces the key's only message)."""

from __future__ import annotations

import asyncio
import uuid

from nats.aio.client import Client

from hades.adapters.nats.heartbeats import Heartbeats
from hades.tasks import stop


async def test_renewing_executors_are_always_listed_and_a_removed_one_never(nc: Client) -> None:
    heartbeats = Heartbeats(nc)
    run = uuid.uuid4().hex[:8]
    busy, quiet, gone = f"busy-{run}", f"quiet-{run}", f"gone-{run}"
    for executor in (busy, quiet, gone):
        await heartbeats.beat(executor, {"executor_id": executor})
    await heartbeats.remove(gone)

    async def renew() -> None:
        while True:
            await heartbeats.beat(busy, {"executor_id": busy})
            await asyncio.sleep(0)

    renewing = asyncio.create_task(renew())
    try:
        for _ in range(100):
            alive = await heartbeats.alive()
            assert busy in alive and quiet in alive and gone not in alive
            assert alive[quiet] == {"executor_id": quiet}
    finally:
        await stop(renewing)  # a plain cancel can be lost mid-reply and leave this loop renewing forever
