"""Values every Hades process on one event log must agree on without being configured: made once, kept in KV
``HADES_SECRETS``. Processes racing to make one all end up with the first writer's (``create`` only if absent).

- ``pipeline-token-key``: signs pipelines' stage tokens (``pipeline_tokens``);
- ``deployment-id``: names this Hades on shared engines (a Docker host two Hades use), so each sweeps only its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

BUCKET = "HADES_SECRETS"
DEPLOYMENT_KEY = "deployment-id"
_CREATED_PATIENCE = 20.0  # seconds to wait for another process's value to reach the replica that answers
_CREATED_RETRY = 0.2


async def shared_value(nc: Client, key: str, make: Callable[[], bytes]) -> bytes:
    """The bucket's value for ``key``, made with ``make`` by the first process that asks."""
    kv = await nc.jetstream().key_value(BUCKET)
    deadline = time.monotonic() + _CREATED_PATIENCE
    while True:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            made = make()
            try:
                await kv.create(key, made)
            except KeyWrongLastSequenceError:  # another process made it first: use theirs, once we can read it
                if time.monotonic() >= deadline:
                    raise
                # on an R3 bucket a direct get may be answered by a replica that has not got it yet
                await asyncio.sleep(_CREATED_RETRY)
                continue
            return made
        if entry.value:
            return bytes(entry.value)
        raise RuntimeError(f"{BUCKET} holds an empty {key}; delete it and restart every Hades process")


async def deployment_id(nc: Client) -> str:
    """This Hades's id: the same for every process on one event log, different for another Hades."""
    value = await shared_value(nc, DEPLOYMENT_KEY, lambda: uuid.uuid4().hex[:16].encode())
    return value.decode()
