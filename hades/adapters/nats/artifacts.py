"""Kept files in the JetStream object store ``HADES_ARTIFACTS``: one object per file, named ``<job id>/<path>``.

The store's retention (``max_age``, ``max_bytes`` in streams.yaml) removes old objects on its own; a name whose object
is gone reads as None. Reads stream the object's chunks instead of nats-py's ``ObjectStore.get``, which gathers the
whole object in memory (by repeated ``bytes +=``) before returning it.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js.api import ObjectInfo
from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore

from hades.adapters.nats.following import HEARTBEAT

ARTIFACTS_STORE = "HADES_ARTIFACTS"
_CHUNKS = "$O.{bucket}.C.{nuid}"
_DIGEST_PREFIX = "SHA-256="


class ArtifactCorrupted(Exception):
    """An object's chunks do not add up to the digest its metadata records."""


@dataclass(frozen=True, slots=True)
class ObjectFacts:
    """What the store knows of one kept file."""

    size: int
    sha256: str  # hex


def _facts(info: ObjectInfo) -> ObjectFacts:
    digest = (info.digest or "").removeprefix(_DIGEST_PREFIX).removeprefix(_DIGEST_PREFIX.lower())
    return ObjectFacts(size=info.size or 0, sha256=base64.urlsafe_b64decode(digest).hex() if digest else "")


class ArtifactStore:
    """The object store of kept files."""

    def __init__(self, nc: Client, bucket: str = ARTIFACTS_STORE, timeout: float = 10.0) -> None:
        self._js = nc.jetstream(timeout=timeout)
        self._bucket = bucket
        self._store: ObjectStore | None = None

    async def _objects(self) -> ObjectStore:
        if self._store is None:
            self._store = await self._js.object_store(self._bucket)
        return self._store

    async def put(self, name: str, data: io.BufferedIOBase) -> ObjectFacts:
        """Store ``data`` (read to its end) under ``name``."""
        return _facts(await (await self._objects()).put(name, data))

    async def info(self, name: str) -> ObjectFacts | None:
        """The object's size and digest; None when it is not there (never stored, deleted, or expired)."""
        try:
            info = await (await self._objects()).get_info(name)
        except NotFoundError:
            return None
        return _facts(info)

    async def delete(self, name: str) -> None:
        """Remove the object (gone already is fine)."""
        try:
            await (await self._objects()).delete(name)
        except NotFoundError:
            return

    async def read(self, name: str, idle: float = 10.0) -> AsyncIterator[bytes] | None:
        """The object's bytes chunk by chunk, checked against its digest at the end; None when it is not there."""
        try:
            info = await (await self._objects()).get_info(name)
        except NotFoundError:
            return None
        return self._chunks(info, idle)

    async def _chunks(self, info: ObjectInfo, idle: float) -> AsyncIterator[bytes]:
        if not info.size:
            return
        # 1 s heartbeats: nats-py starts the consumer again within seconds of a NATS restart, inside ``idle``
        subject = _CHUNKS.format(bucket=self._bucket, nuid=info.nuid)
        sub = await self._js.subscribe(subject, ordered_consumer=True, idle_heartbeat=HEARTBEAT)
        digest = hashlib.sha256()
        try:
            while True:
                msg = await sub.next_msg(timeout=idle)
                digest.update(msg.data)
                yield msg.data
                if msg.metadata.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        if digest.hexdigest() != _facts(info).sha256:
            raise ArtifactCorrupted(f"object {info.name} does not match its recorded SHA-256")
