"""Events to bytes and back; the one place where older event versions are upcast when read."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pydantic

from hades.core.events import Event

_EVENT: pydantic.TypeAdapter[Event] = pydantic.TypeAdapter(Event)

#: Upcasters keyed by (type, version): each turns a decoded dict of that version into the next version's shape.
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}
CURRENT_VERSION = 1


def encode_event(event: Event) -> bytes:
    """The JSON body stored in the stream."""
    return event.model_dump_json(exclude_none=True).encode()


def decode_event(data: bytes) -> Event:
    """Decode a stored event, upcasting older versions to the current shape.

    The current version decodes in one pass; only an event that says it is older takes the upcasting path.
    """
    try:
        event = _EVENT.validate_json(data)
    except pydantic.ValidationError:
        raw = _object(data)
        version = raw.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1 or version >= CURRENT_VERSION:
            raise
        return _upcast(raw, version)
    return event


def _object(data: bytes) -> dict[str, Any]:
    try:
        raw = json.loads(data)
    except ValueError as error:
        raise ValueError(f"not an event: {error}") from error
    if not isinstance(raw, dict):
        raise ValueError(f"not an event: a JSON object is expected, got {data[:80]!r}")
    return raw


def _upcast(raw: dict[str, Any], version: int) -> Event:
    while version < CURRENT_VERSION:
        upcast = _UPCASTERS.get((str(raw.get("type")), version))
        if upcast is None:
            raise ValueError(f"no upcaster for {raw.get('type')!r} version {version}")
        raw = upcast(raw)
        version += 1
        raw["version"] = version
    return _EVENT.validate_json(json.dumps(raw))
