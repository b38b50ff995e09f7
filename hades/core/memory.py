"""Memory limit strings such as ``512M`` or ``2g``, parsed the way the Go Hades parses them.

The format is ``<int><unit>``: everything before the last character is a signed base-10 int64 (so ``+1G``
is accepted), the last character is the unit, ``G``/``g`` (×1024³) or ``M``/``m`` (×1024²). The error texts
are the Go ones. Unlike Go, a result that overflows int64 is rejected instead of wrapping around.
"""

from __future__ import annotations

import re

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_UNIT_BYTES = {"G": 1024**3, "g": 1024**3, "M": 1024**2, "m": 1024**2}
_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}


class MemoryFormatError(ValueError):
    """A memory limit string that does not parse; the message is the Go error text."""


def parse_memory(s: str) -> int:
    """The number of bytes a memory limit string such as ``512M`` stands for.

    Raises MemoryFormatError with the Go message when the string is malformed, negative, has another unit, or
    (unlike Go) when the byte count does not fit in an int64.
    """
    if len(s) < 2:
        raise MemoryFormatError(f"invalid memory limit format: {s}")
    number, unit = s[:-1], s[-1]
    value = _parse_int64(number)
    if value < 0:
        raise MemoryFormatError(f"memory limit cannot be negative: {value}")
    factor = _UNIT_BYTES.get(unit)
    if factor is None:
        raise MemoryFormatError(f"unsupported memory unit {go_quote(unit)}: must be G (gigabytes) or M (megabytes)")
    if value * factor > INT64_MAX:
        raise MemoryFormatError(f"memory limit too large: {s} is more than {INT64_MAX} bytes")
    return value * factor


def min_nonzero(*values: int | None) -> int | None:
    """The smallest of the values that are set and non-zero (Go's FindLimit), or None if there is none.

    Zero and None both mean "no limit", so they never win.
    """
    limits = [value for value in values if value]
    return min(limits) if limits else None


def go_quote(s: str) -> str:
    """``s`` as Go's ``%q`` renders it: double-quoted, with Go's escapes for quotes and unprintables."""
    return '"' + "".join(_go_quote_char(ch) for ch in s) + '"'


def _go_quote_char(ch: str) -> str:
    if ch in '"\\':
        return "\\" + ch
    if ch in _GO_ESCAPES:
        return _GO_ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _parse_int64(number: str) -> int:
    """Go's ``strconv.ParseInt(number, 10, 64)``, failing with the wrapped Go message."""
    if not _GO_INT.fullmatch(number):
        raise MemoryFormatError(_invalid_value(number, "invalid syntax"))
    # Go reads any number of leading zeros; int() refuses very long strings, so drop them first.
    sign = number[0] if number[0] in "+-" else ""
    digits = number.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19 or not INT64_MIN <= int(sign + digits) <= INT64_MAX:
        raise MemoryFormatError(_invalid_value(number, "value out of range"))
    return int(sign + digits)


def _invalid_value(number: str, reason: str) -> str:
    quoted = go_quote(number)
    return f"invalid memory value {quoted}: strconv.ParseInt: parsing {quoted}: {reason}"
