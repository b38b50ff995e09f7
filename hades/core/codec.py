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
    """Decode a stored event, upcasting older versions to the current shape."""
    raw = json.loads(data)
    version = int(raw.get("version", 1))
    if version >= CURRENT_VERSION:
        return _EVENT.validate_json(data)
    while version < CURRENT_VERSION:
        raw = _UPCASTERS[(raw["type"], version)](raw)
        version += 1
        raw["version"] = version
    return _EVENT.validate_json(json.dumps(raw))
