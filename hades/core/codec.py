"""Events to bytes and back; the one place where older event versions are upcast when read.

Every event body carries its ``type`` tag and its shape's ``version`` (1 unless its class says otherwise). To change
the shape of a kind incompatibly (rename a field, change its meaning, make a new field required):

1. give that class ``version: int = Field(default=N + 1, ge=1)``: new events are written as version N + 1;
2. register a pure function here that turns a version-N body (a dict) into a version-N + 1 body, with
   ``@upcaster("<type>", N)``.

Events already in the stream are never rewritten: a version-N body is read through the chain of upcasters up to the
class's current version, then validated as the current model, so the lifecycle and the projections only ever see
the current shape. Adding an optional field needs no new version (older bodies simply lack it), and unknown fields
are ignored, so an older Hades reads a newer body of the same version.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from hades.core.events import Event

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_EVENT: pydantic.TypeAdapter[Event] = pydantic.TypeAdapter(Event)
#: The adapter's core validator, called straight: ``TypeAdapter.validate_json`` is a Python layer that passes seven
#: keyword defaults on, for every event a replay reads.
_validate_json = _EVENT.validator.validate_json


def _current_versions() -> dict[str, int]:
    """Each kind's current version: the default of its class's ``version`` field."""
    kinds = typing.get_args(typing.get_args(Event)[0])
    return {model.model_fields["type"].default: model.model_fields["version"].default for model in kinds}


CURRENT_VERSIONS: Mapping[str, int] = _current_versions()
"""The version each kind is written in today, by type tag."""

CURRENT_VERSION = max(CURRENT_VERSIONS.values())
"""The newest version of any kind (every kind is at version 1 so far)."""

UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""By (type, version): turns a body of that version into the next version's shape. None registered yet: no kind has
changed its shape incompatibly since version 1."""


def upcaster(type_tag: str, version: int) -> Callable[[Upcaster], Upcaster]:
    """Register the function that lifts a ``type_tag`` body from ``version`` to ``version + 1``."""

    def register(function: Upcaster) -> Upcaster:
        if (type_tag, version) in UPCASTERS:
            raise ValueError(f"an upcaster for {type_tag!r} version {version} is already registered")
        UPCASTERS[(type_tag, version)] = function
        return function

    return register


def encode_event(event: Event) -> bytes:
    """The JSON body stored in the stream."""
    return event.model_dump_json(exclude_none=True).encode()


def decode_event(
    data: bytes,
    upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
    current: Mapping[str, int] = CURRENT_VERSIONS,
) -> Event:
    """Decode a stored event, upcasting older versions to the current shape.

    A body of its kind's current version decodes in one pass. An older one is lifted version by version, whether
    or not it would also validate as it stands (a renamed optional field would, and mean something else).
    ``upcasters`` and ``current`` are the module's registry unless a test passes its own.
    """
    try:
        event: Event = _validate_json(data)
    except pydantic.ValidationError:
        raw = _object(data)
        version = raw.get("version", 1)
        if not _is_older(version, current.get(str(raw.get("type")), 1)):
            raise
        return _upcast(raw, version, upcasters, current)
    if event.version < current.get(event.type, 1):
        return _upcast(_object(data), event.version, upcasters, current)
    return event


def _is_older(version: object, current: int) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and 1 <= version < current


def _object(data: bytes) -> dict[str, Any]:
    try:
        raw = json.loads(data)
    except ValueError as error:
        raise ValueError(f"not an event: {error}") from error
    if not isinstance(raw, dict):
        raise ValueError(f"not an event: a JSON object is expected, got {data[:80]!r}")
    return raw


def _upcast(
    raw: dict[str, Any], version: int, upcasters: Mapping[tuple[str, int], Upcaster], current: Mapping[str, int]
) -> Event:
    type_tag = str(raw.get("type"))
    while version < current.get(type_tag, 1):
        upcast = upcasters.get((type_tag, version))
        if upcast is None:
            raise ValueError(f"no upcaster for {type_tag!r} version {version}")
        raw = upcast(dict(raw))
        version += 1
        raw["version"] = version
    return _EVENT.validate_python(raw)
