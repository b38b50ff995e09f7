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
    version = raw.get("version", 1) if isinstance(raw, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"not an event: a JSON object with an integer version >= 1 is expected, got {data[:80]!r}")
    if version >= CURRENT_VERSION:
        return _EVENT.validate_json(data)
    while version < CURRENT_VERSION:
        upcast = _UPCASTERS.get((str(raw.get("type")), version))
        if upcast is None:
            raise ValueError(f"no upcaster for {raw.get('type')!r} version {version}")
        raw = upcast(raw)
        version += 1
        raw["version"] = version
    return _EVENT.validate_json(json.dumps(raw))
