"""Pipeline tokens: what lets a running stage add stages to its own pipeline, and nothing else.

A pipeline's token is HMAC-SHA256 of its job id under a key the API and the executors share without being
configured: generated once and kept in KV ``HADES_SECRETS`` (created only if absent, so replicas racing to create it
end up with the same one), unless ``HADES_PIPELINE_TOKEN_KEY`` sets it. The token itself is never written to an
event: executors compute it when they start a stage's step and hand it over in the step's environment.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from nats.aio.client import Client

from hades.adapters.nats.shared_keys import shared_value

KEY = "pipeline-token-key"


def pipeline_token(key: bytes, pipeline_id: str) -> str:
    """The bearer token of one pipeline (hex)."""
    return hmac.new(key, pipeline_id.encode(), hashlib.sha256).hexdigest()


def token_matches(key: bytes, pipeline_id: str, offered: str) -> bool:
    """Whether ``offered`` is the pipeline's token, compared in constant time."""
    return hmac.compare_digest(pipeline_token(key, pipeline_id).encode(), offered.encode())


async def token_key(nc: Client, configured: str = "") -> bytes:
    """The shared key: the setting when given, else the one in ``HADES_SECRETS`` (made there the first time)."""
    if configured:
        return configured.encode()
    return await shared_value(nc, KEY, lambda: secrets.token_hex(32).encode())


class StageEnvironment:
    """The environment every step of a pipeline's stage gets on top of its metadata: ``HADES_PIPELINE_ID``,
    ``HADES_STAGE``, ``HADES_PIPELINE_TOKEN`` and ``HADES_API_URL``."""

    def __init__(self, nc: Client, api_url: str, configured_key: str = "") -> None:
        self._nc = nc
        self._api_url = api_url
        self._configured = configured_key
        self._key: bytes | None = None

    async def __call__(self, pipeline_id: str, stage: str) -> dict[str, str]:
        """The variables for one stage's steps."""
        if self._key is None:
            self._key = await token_key(self._nc, self._configured)
        return {
            "HADES_PIPELINE_ID": pipeline_id,
            "HADES_STAGE": stage,
            "HADES_PIPELINE_TOKEN": pipeline_token(self._key, pipeline_id),
            "HADES_API_URL": self._api_url,
        }
