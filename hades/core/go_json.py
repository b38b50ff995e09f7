"""JSON values as Go's encoding/json sees them when it decodes a job request: an object with its repeated keys, a
value's kind as an error names it, and the two scalar types the request has (a UUID as github.com/google/uuid reads
it, a time as ``time.Time`` does)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID


@dataclass(frozen=True, slots=True)
class JSONObject:
    """A JSON object: its members in document order, repeated keys kept (Go decodes every one of them)."""

    members: list[tuple[str, Any]]


def json_kind(value: Any) -> str:
    """A JSON value's kind, as an error names what it got."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):  # 1.5, and Go refuses 1e3 and 1.0 for an integer too
        return "a number with a fraction or exponent"
    if isinstance(value, int):
        return "an integer"
    kinds = {str: "a string", list: "an array", JSONObject: "an object"}
    return kinds.get(type(value), type(value).__name__)


# -- Go scalar types -----------------------------------------------------------------------------------------

_UUID36 = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_UUID32 = re.compile(rb"[0-9a-fA-F]{32}")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def go_uuid(value: object) -> object:
    """Read a UUID string as github.com/google/uuid does.

    It takes the plain form, ``urn:uuid:`` plus it, it wrapped in one character each side, or 32 hex digits.
    """
    if value is None or isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a UUID string, not {json_kind(value)}")
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) == 45 and raw[:9].lower() == b"urn:uuid:":
        raw = raw[9:]
    elif len(raw) == 38:
        raw = raw[1:37]  # Go drops the first and last byte without looking at them
    if _UUID36.fullmatch(raw) or _UUID32.fullmatch(raw):
        return UUID(raw.decode())
    raise ValueError("expected a UUID such as 0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11")


def go_time(value: object) -> object:
    """Read a timestamp as Go's time.Time.UnmarshalJSON does: strict RFC 3339, always with a zone."""
    if value is None or (isinstance(value, datetime) and value.tzinfo is not None):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC 3339 time string, not {json_kind(value)}")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError("expected an RFC 3339 time with a zone, such as 2024-05-01T10:20:30Z")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    micros = int((match[7] or "")[:6].ljust(6, "0"))  # Go keeps nanoseconds; Python has microseconds
    try:
        return datetime(year, month, day, hour, minute, second, micros, tzinfo=_go_zone(match[8]))
    except ValueError as exc:  # a day, hour or zone out of range
        raise ValueError(f"not a valid time: {exc}") from exc


def _go_zone(zone: str) -> timezone:
    if zone == "Z":
        return UTC
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"zone offset out of range: {zone}")
    offset = timedelta(hours=hours, minutes=minutes)
    return timezone(-offset if zone[0] == "-" else offset)
