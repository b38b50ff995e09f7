"""Read-model snapshots in the JetStream object store ``HADES_PROJECTIONS`` (chunked, so any size fits)."""

from __future__ import annotations

import logging

from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError

BUCKET = "HADES_PROJECTIONS"
NAME = "read-models"

log = logging.getLogger(__name__)


class SnapshotStore:
    """Save and load the one current snapshot."""

    def __init__(self, nc: Client) -> None:
        self._js = nc.jetstream()

    async def save(self, data: bytes) -> None:
        """Replace the snapshot."""
        store = await self._js.object_store(BUCKET)
        await store.put(NAME, data)

    async def load(self) -> bytes | None:
        """The snapshot, or None when there is none (or it cannot be read: then the log is replayed)."""
        try:
            store = await self._js.object_store(BUCKET)
            result = await store.get(NAME)
        except (ObjectNotFoundError, NotFoundError, BucketNotFoundError):
            return None
        except NatsError as error:
            log.warning("could not read the read-model snapshot (%s); replaying the log", error)
            return None
        return result.data
