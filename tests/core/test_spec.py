"""The ``POST /build`` body: Go's decoding rules, Go's validation order and its exact 400 bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hades.core.errors import HadesError
from hades.core.spec import (
    INVALID_JSON_BODY,
    MAX_TIMEOUT_SECONDS,
    JobSpec,
    Priority,
    SpecError,
    Step,
    is_valid_network,
    parse_job_request,
    validate_callback_url,
    validate_job_spec,
)
from hades.core.stages import Stage

NAME_REQUIRED = 'Invalid request payload: "name" is required'
BAD_NETWORK = "invalid network mode: must be none, bridge, host, default, or a valid network name"


def body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


ONE_STEP = {"image": "alpine"}


def job(**fields: Any) -> bytes:
    """A body with a valid name and one runnable step, plus (or instead) the given fields."""
    return body({"name": "job", "steps": [ONE_STEP], **fields})


def error_of(raw: bytes) -> str:
    with pytest.raises(SpecError) as caught:
        parse_job_request(raw)
    return str(caught.value)


def bind_error_of(raw: bytes) -> str:
    """The refusal of a body that does not bind: Go's ``Invalid JSON body``, then (ours) what and where."""
    message = error_of(raw)
    assert message.startswith(f"{INVALID_JSON_BODY}: ")
    return message


# -- valid payloads ------------------------------------------------------------------------------------------

SEED_MULTI_STEP = """
{
  "name": "Multi-Step Example",
  "steps": [
    {
      "id": 1,
      "name": "Step 1",
      "image": "alpine:latest",
      "script": "echo 'Setting up environment...' > /shared/output.txt"
    },
    {
      "id": 2,
      "name": "Step 2",
      "image": "ubuntu:latest",
      "script": "cat /shared/output.txt && echo 'Processing data...' >> /shared/output.txt"
    },
    {
      "id": 3,
      "name": "Step 3",
      "image": "python:3.9-alpine",
      "script":
        "cat /shared/output.txt && echo 'Finalizing...' >> /shared/output.txt && cat /shared/output.txt"
    }
  ]
}
"""  # the README's multi-step example, verbatim but for the wrapped last script


def test_seed_multi_step_example_parses() -> None:
    spec = parse_job_request(SEED_MULTI_STEP.encode())
    assert spec.name == "Multi-Step Example"
    assert [step.id for step in spec.steps] == [1, 2, 3]
    assert [step.image for step in spec.steps] == ["alpine:latest", "ubuntu:latest", "python:3.9-alpine"]
    assert spec.steps[2].script.endswith("cat /shared/output.txt")
    assert spec.priority == 3
    assert spec.priority_name is Priority.HIGH
    assert spec.id is None
    assert spec.timestamp is None
    assert spec.timeout_seconds == 0
    assert spec.callback_url == ""


def test_seed_simple_job_with_callback_parses() -> None:
    raw = {
        "name": "Example Job",
        "metadata": {"GLOBAL": "test"},
        "callback_url": "http://localhost:8082/adapter/logs",
        "status_callback_url": "http://localhost:8082/adapter/job-status",
        "steps": [{"id": 1, "name": "Hello World", "image": "alpine:latest", "script": "echo 'Hello, Hades!'"}],
    }
    spec = parse_job_request(body(raw))
    assert spec.metadata == {"GLOBAL": "test"}
    assert spec.callback_url == "http://localhost:8082/adapter/logs"
    assert spec.status_callback_url == "http://localhost:8082/adapter/job-status"
    assert spec.steps[0].name == "Hello World"


def test_every_field_is_read() -> None:
    step = {
        "id": 7,
        "name": "build",
        "image": "gradle:8",
        "script": "gradle test",
        "continue_on_error": True,
        "metadata": {"STEP": "1"},
        "cpu_limit": 2,
        "memory_limit": "1G",
        "network": "none",
        "memory_swap": "2G",
        "pids_limit": 100,
    }
    raw = job(
        id="01234567-89ab-cdef-0123-456789abcdef",
        timestamp="2024-05-01T10:20:30Z",
        metadata={"JOB": "x"},
        steps=[step],
        callback_url="https://example.com/logs",
        timeout_seconds=MAX_TIMEOUT_SECONDS,
        priority=2,
    )
    spec = parse_job_request(raw)
    assert spec.id == UUID("01234567-89ab-cdef-0123-456789abcdef")
    assert spec.timestamp == datetime(2024, 5, 1, 10, 20, 30, tzinfo=UTC)
    assert spec.timeout_seconds == MAX_TIMEOUT_SECONDS
    assert spec.priority_name is Priority.MEDIUM
    assert spec.steps == (Step.model_validate(step),)
    assert spec.steps[0].memory_bytes == 1024**3
    assert spec.steps[0].memory_swap_bytes == 2 * 1024**3


def test_unknown_fields_are_ignored() -> None:
    spec = parse_job_request(job(surprise={"deep": [1, 2]}, steps=[{"id": 1, "image": "a", "also": "ignored"}]))
    assert spec.steps[0].id == 1
    assert "surprise" not in spec.model_dump()


def test_field_names_match_case_insensitively_as_in_go() -> None:
    spec = parse_job_request(body({"NAME": "job", "Timeout_Seconds": 5, "Steps": [{"IMAGE": "alpine"}]}))
    assert (spec.name, spec.timeout_seconds, spec.steps[0].image) == ("job", 5, "alpine")
    # Go folds the Kelvin sign and the long s onto K and S.
    assert parse_job_request(job(**{"timeout_\u017feconds": 4})).timeout_seconds == 4
    # An exact match is preferred, and a later key decodes on top of an earlier one.
    assert parse_job_request(job(name="a", NAME="b")).name == "b"
    # Metadata keys are map keys: never folded.
    assert parse_job_request(job(metadata={"Key": "v"})).metadata == {"Key": "v"}


def test_repeated_keys_decode_on_top_of_each_other() -> None:
    raw = b'{"name":"job","metadata":{"a":"1"},"metadata":{"b":"2"},"steps":[{"image":"x"}],"steps":[{"id":2}]}'
    spec = parse_job_request(raw)
    assert spec.metadata == {"a": "1", "b": "2"}
    assert spec.steps == (Step(image="x", id=2),)


def test_a_bad_value_under_a_repeated_key_is_still_an_error() -> None:
    bind_error_of(b'{"name":"job","timeout_seconds":"1","timeout_seconds":1}')


# -- null means absent ---------------------------------------------------------------------------------------


def test_null_fields_take_their_defaults() -> None:
    nulls = dict.fromkeys(
        ["id", "timestamp", "metadata", "callback_url", "status_callback_url", "timeout_seconds", "priority"]
    )
    spec = parse_job_request(job(**nulls))
    assert spec == JobSpec(name="job", steps=(Step(image="alpine"),))
    assert spec.priority == 3


def test_null_step_fields_take_their_defaults() -> None:
    fields = {**dict.fromkeys(Step.model_fields), "image": "alpine"}
    assert parse_job_request(job(steps=[fields])).steps == (Step(image="alpine"),)


def test_null_step_is_a_zero_step_or_leaves_the_earlier_one() -> None:
    assert (
        validate_job_spec(JobSpec(name="job", steps=(Step(),)))
        == "Invalid steps[0].image: a step needs an image to run in"
    )
    raw = b'{"name":"job","steps":[{"image":"a","id":1},{"image":"b","id":2}],"steps":[null,{"id":3}]}'
    assert parse_job_request(raw).steps == (Step(image="a", id=1), Step(image="b", id=3))


def test_null_metadata_value_is_empty_string() -> None:
    assert parse_job_request(job(metadata={"a": None})).metadata == {"a": ""}


def test_null_leaves_an_earlier_value_in_place() -> None:
    assert parse_job_request(b'{"name":"job","name":null,"steps":[{"image":"a"}]}').name == "job"


def test_null_name_is_missing() -> None:
    assert error_of(body({"name": None})) == NAME_REQUIRED


def test_top_level_null_is_an_empty_payload_as_in_go() -> None:
    assert error_of(b"null") == NAME_REQUIRED


def test_go_readings_belong_to_the_request_path_not_the_models() -> None:
    """The models validate in pydantic's core alone, so the stored spec of every ``submitted`` event decodes fast;
    a request body gets Go's readings (nulls, UUID forms, strict RFC 3339) from ``parse_job_request``."""
    plain = "0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11"
    assert parse_job_request(job(id="{" + plain + "}")).id == UUID(plain)  # Go drops one character each side
    bind_error_of(job(timestamp="2025-03-01T12:00:00"))  # no zone: Go refuses it
    bind_error_of(job(timestamp="2025-03-01 12:00:00Z"))
    with pytest.raises(ValueError):
        JobSpec.model_validate({"name": "job", "timestamp": "2025-03-01T12:00:00"})  # aware times only


# -- Invalid JSON body ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"{",
        b'{"name": "job",}',
        b"\xff\xfe{}",
        b'{"name": "\xc3\x28"}',
        b"\xef\xbb\xbf" + b'{"name": "job"}',
        b'{"name": "job"} trailing',
        b'{"name": "job"}{"name": "again"}',
        b"[]",
        b'[{"name": "job"}]',
        b'"job"',
        b"42",
        b"true",
        b'{"name": "job", "priority": NaN}',
        b'{"name": "job", "priority": Infinity}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"name": "job", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
    ids=lambda raw: repr(raw[:30]),
)
def test_undecodable_bodies(raw: bytes) -> None:
    bind_error_of(raw)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": 5},
        {"name": True},
        {"name": ["job"]},
        {"name": {"x": "y"}},
        {"timeout_seconds": "10"},
        {"timeout_seconds": 1.5},
        {"timeout_seconds": 1.0},
        {"timeout_seconds": 1e3},
        {"timeout_seconds": True},
        {"timeout_seconds": 2**63},
        {"priority": "high"},
        {"priority": -(2**63) - 1},
        {"callback_url": 1},
        {"status_callback_url": 1},
        {"status_callback_url": ["http://x/"]},
        {"metadata": {"a": 1}},
        {"metadata": {"a": True}},
        {"metadata": {"a": ["x"]}},
        {"metadata": ["a"]},
        {"metadata": "a=b"},
        {"steps": {}},
        {"steps": "x"},
        {"steps": [1]},
        {"steps": [[]]},
        {"steps": [{"id": "1"}]},
        {"steps": [{"id": 1.5}]},
        {"steps": [{"id": 2**63}]},
        {"steps": [{"cpu_limit": -1}]},
        {"steps": [{"cpu_limit": 2**64}]},
        {"steps": [{"cpu_limit": 0.5}]},
        {"steps": [{"continue_on_error": 1}]},
        {"steps": [{"continue_on_error": "true"}]},
        {"steps": [{"memory_limit": 512}]},
        {"steps": [{"pids_limit": "5"}]},
        {"steps": [{"metadata": {"a": 2}}]},
        {"id": "not-a-uuid"},
        {"id": ""},
        {"id": 12},
        {"id": "01234567-89ab-cdef-0123-456789abcdeg"},
        {"id": "0123456789abcdef0123456789abcde"},
        {"timestamp": "yesterday"},
        {"timestamp": "2024-05-01"},
        {"timestamp": "2024-05-01T10:20:30"},
        {"timestamp": "2024-05-01 10:20:30Z"},
        {"timestamp": "2024-05-01t10:20:30z"},
        {"timestamp": "2023-02-29T10:20:30Z"},
        {"timestamp": "2024-05-01T24:00:00Z"},
        {"timestamp": "2024-05-01T10:20:60Z"},
        {"timestamp": "2024-05-01T10:20:30+24:00"},
        {"timestamp": "2024-05-01T10:20:30,5Z"},
        {"timestamp": "2024-05-01T1:20:30Z"},
        {"timestamp": 1714558830},
    ],
    ids=repr,
)
def test_type_mismatches(fields: dict[str, Any]) -> None:
    bind_error_of(job(**fields))


@pytest.mark.parametrize(
    "uuid_text",
    [
        "01234567-89AB-cdef-0123-456789abcdef",
        "urn:uuid:01234567-89ab-cdef-0123-456789abcdef",
        "URN:UUID:01234567-89ab-cdef-0123-456789abcdef",
        "{01234567-89ab-cdef-0123-456789abcdef}",
        "0123456789abcdef0123456789abcdef",
    ],
)
def test_uuid_forms_go_accepts(uuid_text: str) -> None:
    assert parse_job_request(job(id=uuid_text)).id == UUID("01234567-89ab-cdef-0123-456789abcdef")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T10:20:30Z", datetime(2024, 5, 1, 10, 20, 30, tzinfo=UTC)),
        (
            "2024-05-01T10:20:30.5+02:00",
            datetime(2024, 5, 1, 10, 20, 30, 500000, tzinfo=timezone(timedelta(hours=2))),
        ),
        (
            "2024-02-29T00:00:00.123456789-07:30",
            datetime(2024, 2, 29, 0, 0, 0, 123456, tzinfo=timezone(-timedelta(hours=7, minutes=30))),
        ),
    ],
)
def test_rfc3339_timestamps(text: str, expected: datetime) -> None:
    assert parse_job_request(job(timestamp=text)).timestamp == expected


def test_lone_surrogate_escapes_become_replacement_characters_as_in_go() -> None:
    spec = parse_job_request(b'{"name": "a\\ud800b", "metadata": {"\\udc00": "x"}, "steps": [{"image": "a"}]}')
    assert spec.name == "a\ufffdb"
    assert spec.metadata == {"\ufffd": "x"}


def test_type_error_beats_missing_name() -> None:
    bind_error_of(body({"timeout_seconds": "1"}))
    bind_error_of(body({"steps": [{"cpu_limit": -1}]}))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "the body is empty"),
        (b"\xef\xbb\xbf" + job(), "the body starts with a UTF-8 byte order mark; send the JSON without it"),
        (b'{"name": "\xc3\x28"}', "the body is not UTF-8 (byte 10)"),
        (b'{"name": "job",}', "not JSON: Expecting property name enclosed in double quotes at line 1 column 16"),
        (b"[]", "expected an object, not an array"),
        (job(steps=[{"id": "1"}]), "steps[0].id: expected an integer, not a string"),
        (job(steps=[{"id": 1e12}]), "steps[0].id: expected an integer, not a number with a fraction or exponent"),
        (job(steps=[{"cpu_limit": -1}]), "steps[0].cpu_limit: must be at least 0, not -1"),
        (job(steps=[{"continue_on_error": "yes"}]), "steps[0].continue_on_error: expected true or false, not a string"),
        (job(steps=[{"metadata": {"N": 1}}]), 'steps[0].metadata["N"]: expected a string, not an integer'),
        (job(steps=[1]), "steps[0]: expected an object, not an integer"),
        (job(steps={"id": 1}), "steps: expected an array of steps, not an object"),
        (job(metadata=["A"]), "metadata: expected an object of strings, not an array"),
        (job(id="not-a-uuid"), "id: expected a UUID such as 0b7e3b52-5d0f-4f4e-9a53-2d6f8f1d6c11"),
        (job(timestamp="yesterday"), "timestamp: expected an RFC 3339 time with a zone, such as 2024-05-01T10:20:30Z"),
        (job(timeout_seconds=2**63), "timeout_seconds: must be at most 9223372036854775807, not 9223372036854775808"),
        (job(priority="high"), "priority: expected an integer, not a string"),
    ],
    ids=repr,
)
def test_a_bind_error_says_what_and_where_after_the_go_message(raw: bytes, message: str) -> None:
    assert error_of(raw) == f"{INVALID_JSON_BODY}: {message}"


# -- misspelt keys -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"name": "t", "stpes": [ONE_STEP]}, 'unknown field "stpes" (did you mean "steps"?)'),
        ({"name": "t", "STPES": [ONE_STEP]}, 'unknown field "STPES" (did you mean "steps"?)'),
        ({"nmae": "t", "steps": [ONE_STEP]}, 'unknown field "nmae" (did you mean "name"?)'),
        (
            {"name": "t", "steps": [ONE_STEP], "timout_seconds": 5},
            'unknown field "timout_seconds" (did you mean "timeout_seconds"?)',
        ),
        (
            {"name": "t", "steps": [ONE_STEP, {**ONE_STEP, "scirpt": "exit 1"}]},
            'unknown field "steps[1].scirpt" (did you mean "script"?)',
        ),
        (
            {"name": "t", "steps": [{**ONE_STEP, "continue_on_eror": True}]},
            'unknown field "steps[0].continue_on_eror" (did you mean "continue_on_error"?)',
        ),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_field_meant(payload: dict[str, Any], message: str) -> None:
    assert error_of(body(payload)) == message


@pytest.mark.parametrize("key", ["tags", "colour", "owner", "callback", "timeout", "env", "labels", "retries"])
def test_other_unknown_keys_are_still_ignored(key: str) -> None:
    assert parse_job_request(job(**{key: "x"}, steps=[{**ONE_STEP, key: "x"}])) == parse_job_request(job())


_EVERY_FIELD = sorted({*JobSpec.model_fields, *Step.model_fields, *Stage.model_fields})


@pytest.mark.parametrize("key", [*_EVERY_FIELD, *(name.upper() for name in _EVERY_FIELD)])
def test_no_field_of_any_model_is_taken_for_a_typo_at_any_level(key: str) -> None:
    """A field of the job, a step or a stage, sent at any of those levels, is never refused as a typo (null, so that
    its value is not checked; the job may still be refused for what the null leaves out)."""
    stage = {"name": "a", "steps": [ONE_STEP], key: None}
    for payload in (
        {"name": "t", "steps": [{**ONE_STEP, key: None}], key: None},
        {"name": "p", "stages": [stage], key: None},
    ):
        try:
            parse_job_request(body(payload))
        except SpecError as error:
            assert not str(error).startswith("unknown field")


# -- what would only fail at run time (ours) -----------------------------------------------------------------


@pytest.mark.parametrize("payload", [{"name": "t"}, {"name": "t", "steps": []}, {"name": "t", "steps": None}])
def test_a_job_needs_a_step(payload: dict[str, Any]) -> None:
    assert error_of(body(payload)) == "Invalid steps: a job needs at least one step"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"steps": [ONE_STEP, {"script": "true"}]}, "Invalid steps[1].image: a step needs an image to run in"),
        ({"steps": [{**ONE_STEP, "image": ""}]}, "Invalid steps[0].image: a step needs an image to run in"),
        (
            {"steps": [{**ONE_STEP, "id": 1}, {**ONE_STEP, "id": 2}, {**ONE_STEP, "id": 1}]},
            "Invalid steps[2].id: step id 1 is used by an earlier step",
        ),
        (
            {"metadata": {"A=B": "x"}},
            "Invalid metadata: key 'A=B' cannot be an environment variable name (empty, or has = or NUL)",
        ),
        (
            {"steps": [{**ONE_STEP, "metadata": {"": "x"}}]},
            "Invalid steps[0].metadata: key '' cannot be an environment variable name (empty, or has = or NUL)",
        ),
        (
            {"steps": [{**ONE_STEP, "metadata": {"A\0": "x"}}]},
            "Invalid steps[0].metadata: key 'A\\x00' cannot be an environment variable name (empty, or has = or NUL)",
        ),
    ],
)
def test_what_would_fail_at_run_time_is_refused(fields: dict[str, Any], message: str) -> None:
    assert error_of(job(**fields)) == message


def test_steps_without_ids_may_share_the_zero_id() -> None:
    assert len(parse_job_request(job(steps=[ONE_STEP, ONE_STEP, {**ONE_STEP, "id": 0}])).steps) == 3


def test_go_messages_come_before_ours() -> None:
    assert error_of(job(steps=[{"pids_limit": -1}])) == "pids_limit cannot be negative"
    assert error_of(body({"steps": []})) == NAME_REQUIRED


# -- the validator's messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [{}, {"name": ""}, {"steps": [{"name": "step"}]}])
def test_name_is_required(payload: dict[str, Any]) -> None:
    assert error_of(body(payload)) == NAME_REQUIRED


def test_timeout_bounds() -> None:
    assert error_of(job(timeout_seconds=-1)) == "timeout_seconds cannot be negative"
    assert error_of(job(timeout_seconds=MAX_TIMEOUT_SECONDS + 1)) == "timeout_seconds must not exceed 9223372036"
    assert error_of(job(timeout_seconds=2**63 - 1)) == "timeout_seconds must not exceed 9223372036"
    assert parse_job_request(job(timeout_seconds=MAX_TIMEOUT_SECONDS)).timeout_seconds == MAX_TIMEOUT_SECONDS


def test_name_beats_timeout() -> None:
    assert error_of(body({"timeout_seconds": -1})) == NAME_REQUIRED


def test_timeout_beats_steps() -> None:
    assert error_of(job(timeout_seconds=-1, steps=[{"pids_limit": -1}])) == "timeout_seconds cannot be negative"


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"memory_limit": "lots"}, "Failed to parse RAM limit"),
        ({"memory_limit": "5T"}, "Failed to parse RAM limit"),
        ({"memory_limit": "-1G"}, "Failed to parse RAM limit"),
        ({"memory_limit": "9999999999G"}, "Failed to parse RAM limit"),
        ({"memory_limit": "1G", "memory_swap": "lots"}, "Failed to parse memory_swap limit"),
        ({"memory_swap": "1G"}, "memory_swap requires memory_limit to be set"),
        (
            {"memory_limit": "1G", "memory_swap": "512M"},
            "memory_swap must be greater than or equal to memory_limit",
        ),
        ({"pids_limit": -1}, "pids_limit cannot be negative"),
        ({"network": "-bad"}, BAD_NETWORK),
        ({"network": "my net"}, BAD_NETWORK),
        ({"network": "net\n"}, BAD_NETWORK),
    ],
)
def test_step_messages(step: dict[str, Any], message: str) -> None:
    assert error_of(job(steps=[step])) == message


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"memory_limit": "x", "memory_swap": "y", "pids_limit": -1, "network": "-"},
            "Failed to parse RAM limit",
        ),
        ({"memory_swap": "y"}, "Failed to parse memory_swap limit"),
        ({"memory_swap": "1G", "pids_limit": -1}, "memory_swap requires memory_limit to be set"),
        (
            {"memory_limit": "2G", "memory_swap": "1G", "pids_limit": -1},
            "memory_swap must be greater than or equal to memory_limit",
        ),
        ({"pids_limit": -1, "network": "-"}, "pids_limit cannot be negative"),
    ],
)
def test_order_within_a_step(step: dict[str, Any], message: str) -> None:
    assert error_of(job(steps=[step])) == message


def test_valid_step_limits() -> None:
    step = {"image": "a", "memory_limit": "512m", "memory_swap": "512M", "pids_limit": 0, "network": "bridge"}
    assert parse_job_request(job(steps=[step])).steps[0].memory_swap_bytes == 512 * 1024**2
    step = {"image": "a", "memory_limit": "1g", "memory_swap": "2G"}
    assert parse_job_request(job(steps=[step])).steps[0].memory_bytes == 1024**3


def test_first_step_error_beats_second() -> None:
    steps = [{"network": "-bad"}, {"memory_limit": "bad"}]
    assert error_of(job(steps=steps)) == BAD_NETWORK
    assert error_of(job(steps=list(reversed(steps)))) == "Failed to parse RAM limit"


def test_steps_beat_callback() -> None:
    assert error_of(job(steps=[{"pids_limit": -1}], callback_url="ftp://x")) == "pids_limit cannot be negative"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://exa mple.com/", "callback URL is not parseable"),
        ("http://example.com/\x7f", "callback URL is not parseable"),
        ("http://example.com/a\nb", "callback URL is not parseable"),
        ("/relative/path", "callback URL must be absolute"),
        ("example.com/logs", "callback URL must be absolute"),
        ("ftp://example.com/logs", "callback URL scheme must be http or https"),
        ("mailto:ops@example.com", "callback URL scheme must be http or https"),
        ("http:///logs", "callback URL must include a host"),
        ("http:example.com", "callback URL must include a host"),
    ],
)
def test_callback_messages(url: str, reason: str) -> None:
    assert error_of(job(callback_url=url)) == f"Invalid callback_url: {reason}"


def test_empty_callback_is_not_checked() -> None:
    assert parse_job_request(job(callback_url="")).callback_url == ""


CALLBACK_MESSAGES = [
    ("http://exa mple.com/", "callback URL is not parseable"),
    ("/relative/path", "callback URL must be absolute"),
    ("ftp://example.com/status", "callback URL scheme must be http or https"),
    ("http:///status", "callback URL must include a host"),
]


@pytest.mark.parametrize(("url", "reason"), CALLBACK_MESSAGES)
def test_status_callback_messages(url: str, reason: str) -> None:
    assert error_of(job(status_callback_url=url)) == f"Invalid status_callback_url: {reason}"


@pytest.mark.parametrize(("url", "reason"), CALLBACK_MESSAGES)
def test_a_bad_status_callback_url_fails_whatever_the_callback_url(url: str, reason: str) -> None:
    raw = job(callback_url="http://localhost:8082/adapter/logs", status_callback_url=url)
    assert error_of(raw) == f"Invalid status_callback_url: {reason}"


def test_callback_url_is_checked_before_status_callback_url() -> None:
    raw = job(callback_url="ftp://x/logs", status_callback_url="/relative")
    assert error_of(raw) == "Invalid callback_url: callback URL scheme must be http or https"


def test_steps_beat_status_callback() -> None:
    assert error_of(job(steps=[{"pids_limit": -1}], status_callback_url="ftp://x")) == "pids_limit cannot be negative"


@pytest.mark.parametrize(
    ("fields", "logs", "status"),
    [
        ({}, "", ""),
        ({"callback_url": "http://a/logs"}, "http://a/logs", ""),
        ({"status_callback_url": "https://b/status"}, "", "https://b/status"),
        (
            {"callback_url": "http://a/logs", "status_callback_url": "https://b/status"},
            "http://a/logs",
            "https://b/status",
        ),
        ({"status_callback_url": ""}, "", ""),
        ({"status_callback_url": None}, "", ""),
        ({"Status_Callback_URL": "http://c/"}, "", "http://c/"),
    ],
)
def test_the_two_urls_are_independent(fields: dict[str, Any], logs: str, status: str) -> None:
    spec = parse_job_request(job(**fields))
    assert (spec.callback_url, spec.status_callback_url) == (logs, status)


def test_the_status_callback_url_survives_the_trip_through_json() -> None:
    spec = parse_job_request(job(status_callback_url="http://user:pw@h:9/s?token=x"))
    assert JobSpec.model_validate_json(spec.model_dump_json()).status_callback_url == "http://user:pw@h:9/s?token=x"


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8082/adapter/logs",
        "https://example.com",
        "HTTPS://Example.COM/x",
        "http://user:p%40ss@example.com:8080/a%20b?q=%zz#frag",
        "http://[::1]:8080/logs",
        "http://[fe80::1%25eth0]/logs",
        "http://127.0.0.1/",
        "http://example.com:/",
        "http://b\u00fccher.example/",
        "http://xn--bcher-kva.example/",
        "http://host/path with space",
    ],
)
def test_callback_urls_accepted(url: str) -> None:
    assert validate_callback_url(url) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (":no-scheme", "callback URL is not parseable"),
        ("1http://x", "callback URL is not parseable"),
        ("a:b/c", "callback URL scheme must be http or https"),
        ("localhost:8080/logs", "callback URL scheme must be http or https"),
        ("http://example.com/%zz", "callback URL is not parseable"),
        ("http://example.com/%4", "callback URL is not parseable"),
        ("http://example.com/#%zz", "callback URL is not parseable"),
        ("http://ex%41mple.com/", "callback URL is not parseable"),
        ("http://us%zzer@example.com/", "callback URL is not parseable"),
        ("http://us er@example.com/", "callback URL is not parseable"),
        ("http://example.com:80a/", "callback URL is not parseable"),
        ("http://example.com:80:80/", "callback URL is not parseable"),
        ("http://::1/", "callback URL is not parseable"),
        ("http://[::1/", "callback URL is not parseable"),
        ("http://[::1]x/", "callback URL is not parseable"),
        ("http://[not-ipv6]/", "callback URL is not parseable"),
        ("http://[127.0.0.1]/", "callback URL is not parseable"),
        ("http://ex[am]ple.com/", "callback URL is not parseable"),
        ("http://exa\\mple.com/", "callback URL is not parseable"),
        ("//example.com/logs", "callback URL must be absolute"),
        ("*", "callback URL must be absolute"),
        ("http://user@/logs", "callback URL must include a host"),
        ("http://:8080/logs", "callback URL must include a host"),
    ],
)
def test_callback_url_table(url: str, reason: str) -> None:
    assert validate_callback_url(url) == reason


@pytest.mark.parametrize("network", ["", "none", "bridge", "host", "default", "my-net_1.2", "0net"])
def test_valid_networks(network: str) -> None:
    assert is_valid_network(network)


@pytest.mark.parametrize("network", ["-net", "_net", ".net", "my net", "net/x", "nét", "net\n", "container:abc"])
def test_invalid_networks(network: str) -> None:
    assert not is_valid_network(network)


# -- priority, models ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "priority"),
    [
        (100, Priority.HIGH),
        (3, Priority.HIGH),
        (2, Priority.MEDIUM),
        (1, Priority.LOW),
        (0, Priority.LOW),
        (-5, Priority.LOW),
    ],
)
def test_priority_from_int(number: int, priority: Priority) -> None:
    assert Priority.from_int(number) is priority


def test_priority_as_int_and_names() -> None:
    assert [(p.value, p.as_int) for p in Priority] == [("high", 3), ("medium", 2), ("low", 1)]


def test_explicit_priorities_map_to_queues() -> None:
    assert parse_job_request(job(priority=0)).priority_name is Priority.LOW
    assert parse_job_request(job(priority=-1)).priority_name is Priority.LOW
    assert parse_job_request(job(priority=2)).priority_name is Priority.MEDIUM
    assert parse_job_request(job(priority=9)).priority_name is Priority.HIGH


def test_memory_properties_treat_empty_and_unparseable_as_no_limit() -> None:
    assert Step().memory_bytes is None
    assert Step(memory_limit="bad", memory_swap="").memory_swap_bytes is None
    assert Step(memory_limit="0M").memory_bytes == 0


def test_models_are_frozen() -> None:
    spec = parse_job_request(SEED_MULTI_STEP.encode())
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        spec.steps[0].image = "other"  # type: ignore[misc]


def test_spec_round_trips_through_json() -> None:
    raw = job(
        id="01234567-89ab-cdef-0123-456789abcdef",
        timestamp="2024-05-01T10:20:30.25-03:00",
        steps=[{"id": 1, "image": "a", "metadata": {"A": "b"}, "cpu_limit": 2**64 - 1}],
    )
    spec = parse_job_request(raw)
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
    assert JobSpec.model_validate_json(spec.model_dump_json(exclude_none=True)) == spec


def test_validate_job_spec_on_a_model() -> None:
    assert validate_job_spec(JobSpec(name="job", steps=(Step(image="alpine"),))) is None
    assert validate_job_spec(JobSpec()) == NAME_REQUIRED


def test_spec_error_is_the_domain_error() -> None:
    assert issubclass(SpecError, HadesError)
    assert issubclass(SpecError, ValueError)


# -- nothing but SpecError, whatever comes in ----------------------------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
_STEP_KEYS = [*Step.model_fields, "ID", "Memory_Limit"]
_STEP_VALUES = JSON_VALUES | st.sampled_from(["1G", "512m", "", "bridge", "-x", "2G"]) | st.integers(-3, 3)
STEPS = st.dictionaries(st.sampled_from(_STEP_KEYS), _STEP_VALUES, max_size=6)
_JOB_KEYS = [*JobSpec.model_fields, "NAME", "unknown"]
JOBS = st.dictionaries(
    st.sampled_from(_JOB_KEYS),
    JSON_VALUES | st.lists(STEPS | st.none(), max_size=3) | st.sampled_from(["job", "http://x/", "ftp://[::1"]),
    max_size=8,
)


def _parse_or_spec_error(raw: bytes) -> None:
    try:
        spec = parse_job_request(raw)
    except SpecError as error:
        assert str(error)
    else:
        assert isinstance(spec, JobSpec)
        assert validate_job_spec(spec) is None
        assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


@settings(max_examples=300)
@given(JSON_VALUES)
def test_any_json_value_gives_a_spec_or_a_spec_error(value: Any) -> None:
    _parse_or_spec_error(json.dumps(value).encode())


@settings(max_examples=300)
@given(JOBS)
def test_any_job_shaped_object_gives_a_spec_or_a_spec_error(value: dict[str, Any]) -> None:
    _parse_or_spec_error(json.dumps(value).encode())


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_any_bytes_give_a_spec_or_a_spec_error(raw: bytes) -> None:
    _parse_or_spec_error(raw)


@given(st.text(max_size=60))
def test_any_callback_url_gives_none_or_a_reason(url: str) -> None:
    assert validate_callback_url(url) in {
        None,
        "callback URL is not parseable",
        "callback URL must be absolute",
        "callback URL scheme must be http or https",
        "callback URL must include a host",
    }
