"""Log lines as the runtime emits them, their batching per container, and the Docker container settings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.docker.containers import (
    LABEL_ATTEMPT,
    LABEL_EXECUTOR,
    LABEL_JOB,
    LABEL_STEP,
    PRIORITY_KEYS,
    SHARED_PATH,
    DockerDefaults,
    container_config,
    host_config,
    image_reference,
    step_env,
    volume_name,
)
from hades.core.lifecycle import JobState, Status
from hades.core.logs import (
    Log,
    LogBudget,
    LogEntry,
    OutputStream,
    _parse_in_full,
    coalesce,
    is_timestamp,
    of_attempt,
    parse_line,
    parse_timestamp,
)
from hades.core.spec import JobSpec, Priority, Step

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
JOB_ID = "9d3c6a10-7f2b-4c1e-8a55-3b0e2f9d7c41"

# -- parse_line --------------------------------------------------------------------------------------------------


def test_a_rfc3339nano_prefix_is_the_timestamp_and_the_rest_the_message() -> None:
    entry = parse_line("2024-05-01T10:20:30.123456789Z hello  world", "stdout", NOW)
    assert entry == LogEntry(
        timestamp=datetime(2024, 5, 1, 10, 20, 30, 123456, tzinfo=UTC), message="hello  world", output_stream="stdout"
    )


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("2024-05-01T10:20:30Z", datetime(2024, 5, 1, 10, 20, 30, tzinfo=UTC)),
        ("2024-05-01T10:20:30.5Z", datetime(2024, 5, 1, 10, 20, 30, 500000, tzinfo=UTC)),
        ("2024-05-01T10:20:30.000000001Z", datetime(2024, 5, 1, 10, 20, 30, tzinfo=UTC)),
        ("2024-05-01T12:20:30.999999999+02:00", datetime(2024, 5, 1, 10, 20, 30, 999999, tzinfo=UTC)),
    ],
)
def test_prefixes_keep_microseconds_and_become_utc(prefix: str, expected: datetime) -> None:
    entry = parse_line(f"{prefix} msg", "stderr", NOW)
    assert entry is not None
    assert entry.timestamp == expected
    assert entry.timestamp.utcoffset() == timedelta(0)
    assert (entry.message, entry.output_stream) == ("msg", "stderr")


_ENGINE_STAMPS = st.builds(
    lambda moment, fraction: moment.strftime("%Y-%m-%dT%H:%M:%S.") + fraction + "Z",
    st.datetimes(),
    st.text("0123456789", min_size=1, max_size=40),
)
_NEAR_MISSES = st.builds(
    lambda stamp, at, text: stamp[:at] + text + stamp[at + 1 :],
    _ENGINE_STAMPS,
    st.integers(0, 29),
    st.text("0123456789.:TZ+-x٣ ", max_size=2),
)


@given(text=st.one_of(_ENGINE_STAMPS, _NEAR_MISSES, st.text(max_size=32)))
def test_the_engines_stamps_take_a_short_way_to_the_same_time(text: str) -> None:
    parsed = parse_timestamp(text)
    assert parsed == _parse_in_full(text)
    assert parsed is None or parsed.tzinfo is UTC
    assert is_timestamp(text) == (parsed is not None)


@pytest.mark.parametrize(
    "line",
    [
        "hello world",
        "not-a-time hello",
        "2024-05-01 hello",  # a date alone has no zone
        "2024-05-01T10:20:30 hello",  # no zone
        "2024-13-01T10:20:30Z month thirteen",
        "12:00:00Z what",
    ],
)
def test_without_a_valid_prefix_the_time_is_now_and_the_message_the_whole_line(line: str) -> None:
    assert parse_line(line, "stdout", NOW) == LogEntry(timestamp=NOW, message=line, output_stream="stdout")


@pytest.mark.parametrize("line", ["", " ", "\n", "\t \r\n"])
def test_blank_lines_are_dropped(line: str) -> None:
    assert parse_line(line, "stdout", NOW) is None


def test_surrounding_whitespace_is_trimmed() -> None:
    entry = parse_line("  2024-05-01T10:20:30.123456789Z    indented output \t\r\n", "stdout", NOW)
    assert entry is not None
    assert entry.message == "indented output"
    assert parse_line("\t plain line  \n", "stdout", NOW) == LogEntry(
        timestamp=NOW, message="plain line", output_stream="stdout"
    )


def test_a_structured_line_keeps_the_applications_own_time() -> None:
    line = '2024-05-01T10:20:30.123456789Z time="2024-05-01T10:20:29.5Z" level="info" msg="server started"'
    entry = parse_line(line, "stderr", NOW)
    assert entry == LogEntry(
        timestamp=datetime(2024, 5, 1, 10, 20, 29, 500000, tzinfo=UTC),
        message='level="info" msg="server started"',
        output_stream="stderr",
    )


def test_a_structured_line_without_a_runtime_prefix_keeps_its_time_too() -> None:
    entry = parse_line('time="2024-05-01T10:20:29+01:00" level="warn" msg="disk low"', "stdout", NOW)
    assert entry is not None
    assert entry.timestamp == datetime(2024, 5, 1, 9, 20, 29, tzinfo=UTC)
    assert entry.message == 'level="warn" msg="disk low"'


def test_a_structured_line_with_a_bad_time_keeps_the_runtime_time_and_whole_message() -> None:
    line = '2024-05-01T10:20:30Z time="yesterday" level="info" msg="x"'
    entry = parse_line(line, "stdout", NOW)
    assert entry is not None
    assert entry.timestamp == datetime(2024, 5, 1, 10, 20, 30, tzinfo=UTC)
    assert entry.message == 'time="yesterday" level="info" msg="x"'


def test_a_structured_time_with_a_space_is_not_cut_into_the_message() -> None:
    line = '2024-05-01T10:20:30Z time="2024-05-01 10:20:29.5+00:00" level="info" msg="x"'
    entry = parse_line(line, "stdout", NOW)
    assert entry is not None
    assert entry.message in ('level="info" msg="x"', line.partition(" ")[2])


@pytest.mark.parametrize("line", ["2024-05-01T10:20Z hello", "20240501T102030Z hello"])
def test_only_rfc3339_prefixes_are_timestamps(line: str) -> None:
    assert parse_line(line, "stdout", NOW) == LogEntry(timestamp=NOW, message=line, output_stream="stdout")


# -- coalesce ----------------------------------------------------------------------------------------------------


def _entry(n: int, stream: OutputStream = "stdout") -> LogEntry:
    return LogEntry(timestamp=NOW + timedelta(seconds=n), message=f"line {n}", output_stream=stream)


def test_coalesce_gives_one_log_per_container_in_first_seen_order() -> None:
    batches = [
        Log(job_id=JOB_ID, container_id="b", step_id=2, logs=[_entry(1)]),
        Log(job_id=JOB_ID, container_id="a", step_id=1, logs=None),
        Log(job_id=JOB_ID, container_id="c", step_id=3, logs=[_entry(2, "stderr")]),
        Log(job_id=JOB_ID, container_id="b", step_id=2, logs=[_entry(3), _entry(4)]),
        Log(job_id=JOB_ID, container_id="c", step_id=3, logs=[]),
        Log(job_id=JOB_ID, container_id="b", step_id=2, logs=[_entry(5, "stderr")]),
    ]
    merged = coalesce(batches)
    assert [log.container_id for log in merged] == ["b", "a", "c"]
    assert [log.step_id for log in merged] == [2, 1, 3]
    assert merged[0].logs == [_entry(1), _entry(3), _entry(4), _entry(5, "stderr")]
    assert merged[1].logs is None, "a silent container keeps its slot with logs null"
    assert merged[2].logs == [_entry(2, "stderr")]
    assert all(log.job_id == JOB_ID for log in merged)


def test_a_slot_registered_first_then_filled_gets_its_lines() -> None:
    merged = coalesce(
        [
            Log(job_id=JOB_ID, container_id="a", logs=None),
            Log(job_id=JOB_ID, container_id="a", logs=[_entry(1)]),
        ]
    )
    assert merged == [Log(job_id=JOB_ID, container_id="a", logs=[_entry(1)])]


def test_coalesce_of_nothing_is_nothing_and_inputs_are_untouched() -> None:
    assert coalesce([]) == []
    batch = Log(job_id=JOB_ID, container_id="a", logs=[_entry(1)])
    coalesce([batch, Log(job_id=JOB_ID, container_id="a", logs=[_entry(2)])])
    assert batch.logs == [_entry(1)]


def test_one_attempts_batches_keep_the_empty_slots_and_batches_from_before_attempts_were_recorded() -> None:
    old = Log(job_id=JOB_ID, container_id="old", logs=[_entry(0)])
    first = [Log(job_id=JOB_ID, container_id="a1", step_id=1, attempt=1, logs=[_entry(1)])]
    second = [
        Log(job_id=JOB_ID, container_id="a2", step_id=1, attempt=2, logs=None),
        Log(job_id=JOB_ID, container_id="b2", step_id=2, attempt=2, logs=None),
        Log(job_id=JOB_ID, container_id="a2", step_id=1, attempt=2, logs=[_entry(2)]),
    ]
    batches = [old, *first, *second]
    assert [log.container_id for log in coalesce(of_attempt(batches, 2))] == ["old", "a2", "b2"]
    assert coalesce(of_attempt(batches, 2))[2].logs is None, "a silent step of the attempt keeps its slot"
    assert of_attempt(batches, 1) == [old, *first]
    assert of_attempt(batches, None) == batches


def test_the_wire_shape_leaves_out_our_fields() -> None:
    batch = Log(job_id=JOB_ID, container_id="a", step_id=1, attempt=2, logs=None)
    assert batch.wire() == {"job_id": JOB_ID, "container_id": "a", "logs": None}
    assert batch.wire_json() == f'{{"job_id":"{JOB_ID}","container_id":"a","logs":null}}'


# -- docker container settings -----------------------------------------------------------------------------------


def _job(*steps: Step, metadata: dict[str, str] | None = None, attempt: int = 2) -> JobState:
    spec = JobSpec(id=uuid.UUID(JOB_ID), name="grade", metadata=metadata or {}, steps=steps)
    return JobState(
        job_id=JOB_ID,
        spec=spec,
        priority=Priority.HIGH,
        status=Status.RUNNING,
        submitted_at=NOW,
        attempt=attempt,
    )


DEFAULTS = DockerDefaults(executor_id="exec-1")


def test_step_env_is_job_metadata_then_step_metadata_then_uuid_and_job_name() -> None:
    step = Step(image="alpine", metadata={"SHARED": "from-step", "STEP_ONLY": "s"})
    job = _job(step, metadata={"JOB_ONLY": "j", "SHARED": "from-job"})
    assert step_env(job, step) == [
        "JOB_ONLY=j",
        "SHARED=from-step",
        "STEP_ONLY=s",
        f"UUID={JOB_ID}",
        "JOB_NAME=grade",
    ]


def test_uuid_and_job_name_cannot_be_overridden_by_metadata() -> None:
    step = Step(image="alpine", metadata={"JOB_NAME": "spoofed"})
    job = _job(step, metadata={"UUID": "not-the-job"})
    env = step_env(job, step)
    assert f"UUID={JOB_ID}" in env and "JOB_NAME=grade" in env
    assert "UUID=not-the-job" not in env and "JOB_NAME=spoofed" not in env
    assert len(env) == len({entry.split("=", 1)[0] for entry in env}), "no duplicate keys"


def test_values_with_equals_signs_and_empty_values_pass_through() -> None:
    step = Step(image="alpine", metadata={"EMPTY": ""})
    env = step_env(_job(step, metadata={"URL": "https://x/?a=b"}), step)
    assert env[:2] == ["URL=https://x/?a=b", "EMPTY="]


def test_the_go_priority_keys_never_reach_the_job_env() -> None:
    assert set(PRIORITY_KEYS) == {"hades.tum.de/priority", "hades.tum.de/priorityName"}
    step = Step(image="alpine")
    job = _job(step, metadata={"hades.tum.de/priority": "3", "hades.tum.de/priorityName": "high", "KEEP": "1"})
    env = step_env(job, step)
    assert not [entry for entry in env if entry.startswith("hades.tum.de/")]
    assert "KEEP=1" in env


def test_the_go_priority_keys_never_reach_the_env_from_step_metadata_either() -> None:
    step = Step(image="alpine", metadata={"hades.tum.de/priority": "1", "hades.tum.de/priorityName": "low"})
    env = step_env(_job(step), step)
    assert not [entry for entry in env if entry.startswith("hades.tum.de/")]


def test_container_config_wraps_the_script_in_the_script_executor() -> None:
    step = Step(id=7, image="alpine", script="echo hi && ls -la /shared")
    config = container_config(_job(step), 0, DEFAULTS)
    assert config["Entrypoint"] == ["/bin/sh", "-c", "echo hi && ls -la /shared"]
    bash = DockerDefaults(executor_id="exec-1", script_executor="/bin/bash  -eu -c")
    assert container_config(_job(step), 0, bash)["Entrypoint"] == ["/bin/bash", "-eu", "-c", step.script]


@pytest.mark.parametrize("script", ["", "   ", "\n\t"])
def test_no_entrypoint_without_a_script(script: str) -> None:
    config = container_config(_job(Step(image="alpine", script=script)), 0, DEFAULTS)
    assert "Entrypoint" not in config
    assert "Cmd" not in config


def test_container_config_has_image_env_workdir_labels_and_mount() -> None:
    steps = (Step(image="alpine:3.22", script="true"), Step(image="busybox", script="true", metadata={"K": "v"}))
    job = _job(*steps, attempt=3)
    config = container_config(job, 1, DEFAULTS)
    assert config["Image"] == "busybox:latest"
    assert config["Env"] == ["K=v", f"UUID={JOB_ID}", "JOB_NAME=grade"]
    assert config["WorkingDir"] == SHARED_PATH == "/shared"
    assert config["Labels"] == {LABEL_JOB: JOB_ID, LABEL_EXECUTOR: "exec-1", LABEL_ATTEMPT: "3", LABEL_STEP: "1"}
    volume = volume_name(JOB_ID, 3)
    assert config["HostConfig"]["Mounts"] == [{"Type": "volume", "Source": volume, "Target": "/shared"}]
    assert volume == f"hades-{JOB_ID}-3"


def test_host_config_without_limits_only_mounts_the_volume() -> None:
    assert host_config(Step(image="alpine"), "vol", DEFAULTS) == {
        "Mounts": [{"Type": "volume", "Source": "vol", "Target": "/shared"}],
        "Privileged": False,
        "SecurityOpt": ["no-new-privileges"],
    }


def test_host_config_carries_the_steps_limits() -> None:
    step = Step(image="alpine", cpu_limit=2, memory_limit="512M", memory_swap="1G", pids_limit=64, network="none")
    config = host_config(step, "vol", DEFAULTS)
    assert config["NanoCpus"] == 2_000_000_000
    assert config["Memory"] == 512 * 1024**2 == 536870912
    assert config["MemorySwap"] == 1024**3
    assert config["PidsLimit"] == 64
    assert config["NetworkMode"] == "none"


def test_executor_defaults_apply_only_when_the_step_sets_no_limit() -> None:
    defaults = DockerDefaults(executor_id="exec-1", cpu_limit=4, memory_limit="1g")
    bare = host_config(Step(image="alpine"), "vol", defaults)
    assert (bare["NanoCpus"], bare["Memory"]) == (4_000_000_000, 1024**3)
    smaller = host_config(Step(image="alpine", cpu_limit=1, memory_limit="256m"), JOB_ID, defaults)
    assert (smaller["NanoCpus"], smaller["Memory"]) == (1_000_000_000, 256 * 1024**2)
    larger = host_config(Step(image="alpine", cpu_limit=8, memory_limit="2G"), JOB_ID, defaults)
    assert (larger["NanoCpus"], larger["Memory"]) == (8_000_000_000, 2 * 1024**3)


def test_zero_or_negative_pids_and_empty_network_are_left_out() -> None:
    config = host_config(Step(image="alpine", pids_limit=0, network=""), JOB_ID, DEFAULTS)
    assert "PidsLimit" not in config and "NetworkMode" not in config
    assert "PidsLimit" not in host_config(Step(image="alpine", pids_limit=-1), JOB_ID, DEFAULTS)


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("alpine", "alpine:latest"),
        ("alpine:3.22", "alpine:3.22"),
        ("library/alpine", "library/alpine:latest"),
        ("localhost:5000/x", "localhost:5000/x:latest"),
        ("localhost:5000/x:1.0", "localhost:5000/x:1.0"),
        ("ghcr.io/ls1intum/hades/runner", "ghcr.io/ls1intum/hades/runner:latest"),
        ("alpine@sha256:" + "a" * 64, "alpine@sha256:" + "a" * 64),
        ("localhost:5000/x@sha256:" + "b" * 64, "localhost:5000/x@sha256:" + "b" * 64),
        ("alpine:3.22@sha256:" + "c" * 64, "alpine:3.22@sha256:" + "c" * 64),
    ],
)
def test_image_reference_always_names_a_tag(image: str, expected: str) -> None:
    assert image_reference(image) == expected


def test_a_budget_cuts_long_lines_and_says_so() -> None:
    budget = LogBudget(max_job_bytes=1000, max_line_bytes=10)
    assert budget.admit("short") == "short"
    assert budget.admit("x" * 25) == "x" * 10 + " [hades: line cut at 10 of 25 bytes]"


def test_a_budget_replaces_what_exceeds_the_job_cap_with_notices() -> None:
    budget = LogBudget(max_job_bytes=12, max_line_bytes=100)
    kept = [budget.admit(line) for line in ("aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff")]
    assert kept[:3] == ["aaaa", "bbbb", "cccc"]
    assert kept[3] == "[hades: this job's log reached its limit of 12 bytes; further output is dropped]"
    assert kept[4:] == [None, None]
    assert budget.closing_notice() == "[hades: 2 lines dropped after the log limit of 12 bytes]"


def test_a_budget_within_its_limits_says_nothing() -> None:
    budget = LogBudget()
    assert budget.admit("hello") == "hello"
    assert budget.closing_notice() is None


def test_a_budget_counts_utf8_bytes_not_characters() -> None:
    budget = LogBudget(max_job_bytes=1000, max_line_bytes=10)
    assert budget.admit("é" * 5) == "é" * 5  # 10 bytes: at the cap, kept whole
    assert budget.admit("é" * 6) == "é" * 5 + " [hades: line cut at 10 of 12 bytes]"
    assert budget.used == 10 + len(("é" * 5 + " [hades: line cut at 10 of 12 bytes]").encode())
