"""The global cap on running jobs (``MAX_PARALLELISM``) as leases in KV ``HADES_SLOTS``.

There are ``limit`` slot keys; an executor takes one with a create (which fails if the key exists) before it takes
a job, renews it while the job runs, and deletes it after. A lease that is not renewed expires with the bucket's
TTL, so an executor that dies gives its slots back by itself. Every executor process on the cluster shares the
same keys, so the cap holds across all of them.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

BUCKET = "HADES_SLOTS"


@dataclass
class Lease:
    """One held slot and its revision (the CAS token for renewing and releasing it)."""

    key: str
    revision: int


class SlotLeases:
    """Take, renew and give back slots of a cluster-wide cap."""

    def __init__(self, nc: Client, limit: int) -> None:
        self._nc = nc
        self._limit = limit
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._nc.jetstream().key_value(BUCKET)
        return self._kv

    async def ttl(self) -> float:
        """Seconds a lease lives without renewal."""
        return float((await (await self._bucket()).status()).ttl or 10)

    async def acquire(self, holder: str) -> Lease | None:
        """A free slot, or None when all ``limit`` are held."""
        kv = await self._bucket()
        start = random.randrange(self._limit)
        for offset in range(self._limit):
            key = f"slot-{(start + offset) % self._limit}"
            try:
                revision = await kv.create(key, holder.encode())
            except KeyWrongLastSequenceError:
                continue
            return Lease(key, revision)
        return None

    async def renew(self, lease: Lease, holder: str) -> bool:
        """Keep the slot; False if it had expired and someone else holds it now."""
        kv = await self._bucket()
        try:
            lease.revision = await kv.update(lease.key, holder.encode(), last=lease.revision)
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            return False
        return True

    async def release(self, lease: Lease) -> None:
        """Give the slot back (only if it is still ours)."""
        kv = await self._bucket()
        with contextlib.suppress(KeyWrongLastSequenceError, KeyNotFoundError):
            await kv.delete(lease.key, last=lease.revision)
