"""Memory limit parsing: the Go test vectors, the Go error texts, and the overflow Go does not catch."""

from __future__ import annotations

import pytest

from hades.core.memory import INT64_MAX, MemoryFormatError, go_quote, min_nonzero, parse_memory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1G", 1073741824),
        ("2g", 2147483648),
        ("512M", 536870912),
        ("2m", 2097152),
        ("+1G", 1073741824),
        ("0M", 0),
        ("-0G", 0),
        ("007M", 7 * 1024**2),
        ("8589934591G", 8589934591 * 1024**3),
    ],
)
def test_parses_go_vectors(text: str, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "invalid memory limit format: "),
        ("G", "invalid memory limit format: G"),
        ("5", "invalid memory limit format: 5"),
        ("abcG", 'invalid memory value "abc": strconv.ParseInt: parsing "abc": invalid syntax'),
        ("+G", 'invalid memory value "+": strconv.ParseInt: parsing "+": invalid syntax'),
        ("1.5G", 'invalid memory value "1.5": strconv.ParseInt: parsing "1.5": invalid syntax'),
        (" 1G", 'invalid memory value " 1": strconv.ParseInt: parsing " 1": invalid syntax'),
        ("1_0G", 'invalid memory value "1_0": strconv.ParseInt: parsing "1_0": invalid syntax'),
        ("١G", 'invalid memory value "١": strconv.ParseInt: parsing "١": invalid syntax'),
        (
            "9223372036854775808M",
            'invalid memory value "9223372036854775808": strconv.ParseInt: parsing "9223372036854775808": '
            "value out of range",
        ),
        ("-5G", "memory limit cannot be negative: -5"),
        ("-05M", "memory limit cannot be negative: -5"),
        ("5T", 'unsupported memory unit "T": must be G (gigabytes) or M (megabytes)'),
        ("5K", 'unsupported memory unit "K": must be G (gigabytes) or M (megabytes)'),
        ("5B", 'unsupported memory unit "B": must be G (gigabytes) or M (megabytes)'),
        ("123", 'unsupported memory unit "3": must be G (gigabytes) or M (megabytes)'),
        ("5\n", 'unsupported memory unit "\\n": must be G (gigabytes) or M (megabytes)'),
    ],
)
def test_rejects_with_go_message(text: str, message: str) -> None:
    with pytest.raises(MemoryFormatError) as caught:
        parse_memory(text)
    assert str(caught.value) == message


def test_value_error_order_is_go_order() -> None:
    """The number is parsed before the unit is looked at, and the sign before the unit too."""
    with pytest.raises(MemoryFormatError, match="invalid memory value"):
        parse_memory("xT")
    with pytest.raises(MemoryFormatError, match="cannot be negative"):
        parse_memory("-1T")


@pytest.mark.parametrize("text", ["8589934592G", "8796093022208M", "9223372036854775807G"])
def test_rejects_overflow_unlike_go(text: str) -> None:
    with pytest.raises(MemoryFormatError) as caught:
        parse_memory(text)
    assert str(caught.value) == f"memory limit too large: {text} is more than {INT64_MAX} bytes"


def test_very_long_numbers_are_out_of_range_not_a_crash() -> None:
    with pytest.raises(MemoryFormatError, match="value out of range"):
        parse_memory("9" * 5000 + "M")
    assert parse_memory("0" * 5000 + "1M") == 1024**2


def test_memory_format_error_is_a_value_error() -> None:
    assert issubclass(MemoryFormatError, ValueError)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((), None),
        ((None, None), None),
        ((0, 0), None),
        ((0, 5), 5),
        ((5, 0), 5),
        ((7, 3), 3),
        ((None, 4, 0, 9), 4),
    ],
)
def test_min_nonzero(values: tuple[int | None, ...], expected: int | None) -> None:
    assert min_nonzero(*values) == expected


def test_go_quote() -> None:
    assert go_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert go_quote("\t\x01\x7f") == '"\\t\\x01\\x7f"'
    assert go_quote("é\u00ad") == '"é\\u00ad"'
