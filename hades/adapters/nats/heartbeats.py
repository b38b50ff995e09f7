"""Executor heartbeats in KV ``HADES_WORKERS``: a key per live executor that expires unless renewed.

The bucket's TTL (streams.yaml) is how long an executor may stay silent before the scheduler takes it for lost;
executors renew their key every third of it.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

BUCKET = "HADES_WORKERS"


class Heartbeats:
    """Announce this executor, and list the live ones."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._nc.jetstream().key_value(BUCKET)
        return self._kv

    async def ttl(self) -> float:
        """Seconds a heartbeat lives."""
        status = await (await self._bucket()).status()
        return float(status.ttl or 15)

    async def beat(self, executor_id: str, info: dict[str, Any]) -> None:
        """Renew this executor's key."""
        await (await self._bucket()).put(executor_id, json.dumps(info).encode())

    async def remove(self, executor_id: str) -> None:
        """Say goodbye on a clean stop, so nobody waits for the TTL."""
        kv = await self._bucket()
        with contextlib.suppress(KeyNotFoundError):
            await kv.delete(executor_id)

    async def alive(self) -> dict[str, dict[str, Any]]:
        """The live executors and what they last said about themselves.

        The keys come from the bucket stream's subjects, one request, not from nats-py's ``kv.keys()``: its watcher
        can end its initial listing without a key that is being renewed at that moment (history 1: the renewal
        removes the message the listing counted), and the scheduler then took a live executor for lost (seen: an
        attempt handed back 2 s after it started, while its executor beat every few seconds)."""
        kv = await self._bucket()
        prefix = f"$KV.{BUCKET}."
        info = await self._nc.jetstream().stream_info(f"KV_{BUCKET}", subjects_filter=f"{prefix}>")
        found: dict[str, dict[str, Any]] = {}
        for subject in info.state.subjects or {}:
            key = subject[len(prefix) :]
            try:
                entry = await kv.get(key)
            except KeyNotFoundError:  # expired, or deleted on a clean stop (nats-py reads a delete as not found)
                continue
            if entry.value:
                found[key] = json.loads(entry.value)
        return found
