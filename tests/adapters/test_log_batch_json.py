"""A batch is serialised from plain dicts, byte for byte as ``Log.model_dump_json`` would (readers decode it with
``Log.model_validate_json``), for any message and any timestamp an executor may hand on."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from hades.adapters.nats.log_store import _Line, batch_json
from hades.core.logs import Log, LogEntry

_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
_LINES = st.lists(
    st.builds(
        lambda moment, message, stream: _Line(timestamp=moment, message=message, output_stream=stream),
        st.datetimes(timezones=_ZONES),
        st.text(),
        st.sampled_from(["stdout", "stderr"]),
    ),
    max_size=20,
)


@given(
    lines=st.one_of(st.none(), _LINES),
    container=st.text(max_size=12),
    step=st.integers(0, 99),
    attempt=st.one_of(st.none(), st.integers(1, 9)),
)
def test_a_batch_is_byte_for_byte_the_models_json(
    lines: list[_Line] | None, container: str, step: int, attempt: int | None
) -> None:
    entries = None if lines is None else [LogEntry(**line) for line in lines]
    model = Log(job_id="job-1", container_id=container, step_id=step, attempt=attempt, logs=entries)
    body = batch_json("job-1", container, step, attempt, lines)
    assert body == model.model_dump_json().encode()
    assert Log.model_validate_json(body) == model
