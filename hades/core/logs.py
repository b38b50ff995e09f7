"""Job logs in the Go Hades's wire shape, and the parsing of the lines a container runtime emits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

OutputStream = Literal["stdout", "stderr"]

#: A longer line is cut to this many bytes (the Go parser's maximum line).
MAX_LINE_BYTES = 1024 * 1024

_STRUCTURED = re.compile(r'^time="(?P<time>[^"]*)" level="[^"]*" msg="[^"]*"')
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.(\d+))?(?:Z|[+-]\d{2}:\d{2})")


class LogEntry(BaseModel):
    """One line of a step's output."""

    model_config = ConfigDict(frozen=True)

    timestamp: datetime
    message: str
    output_stream: OutputStream


class Log(BaseModel):
    """A batch of one container's lines; a batch with ``logs`` None registers the container's slot.

    ``step_id`` and ``attempt`` are ours, not the Go wire shape's: the answers leave them out (``wire``). A batch
    written before attempts were recorded has ``attempt`` None.
    """

    model_config = ConfigDict(frozen=True)

    job_id: str
    container_id: str
    step_id: int | None = None
    attempt: int | None = None
    logs: list[LogEntry] | None = None

    def wire(self) -> dict[str, Any]:
        """The batch in the Go wire shape (``job_id``, ``container_id``, ``logs``), as JSON-ready values."""
        return self.model_dump(mode="json", exclude=_OURS)

    def wire_json(self) -> str:
        """The batch in the Go wire shape, as JSON."""
        return self.model_dump_json(exclude=_OURS)


#: The fields a ``Log`` carries that the Go wire shape does not.
_OURS = {"step_id", "attempt"}


def parse_timestamp(text: str) -> datetime | None:
    """An RFC 3339 timestamp with up to nanosecond precision, as UTC; None when it is anything else.

    The engine's own shape (``2026-12-03T09:14:51.123456789Z``) takes a short way: its whole seconds are checked
    once per second (memoised) and ``datetime.fromisoformat`` (3.11+: takes ``Z``, cuts the fraction to
    microseconds) reads it in one call; anything else is parsed in full. Both give the same answer (a test says so).
    """
    if _engine_shaped(text):
        return datetime.fromisoformat(text)
    return _parse_in_full(text)


def is_timestamp(text: str) -> bool:
    """Whether :func:`parse_timestamp` would give a time (without building it, for the engine's own shape)."""
    return _engine_shaped(text) or _parse_in_full(text) is not None


def _engine_shaped(text: str) -> bool:
    if len(text) > 20 and text[19] == "." and text[-1] == "Z":
        fraction = text[20:-1]
        return fraction.isascii() and fraction.isdigit() and _whole_second(text[:19])
    return False


@lru_cache(maxsize=64)
def _whole_second(text: str) -> bool:
    """Whether ``<text>Z`` is a timestamp (``text`` being year to second)."""
    return _parse_in_full(text + "Z") is not None


def _parse_in_full(text: str) -> datetime | None:
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    if match.group(1) is not None:
        start, end = match.span(1)
        text = text[:start] + match.group(1)[:6].ljust(6, "0") + text[end:]
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def split_line(line: str, now: datetime) -> tuple[datetime, str] | None:
    """A runtime line ``<RFC3339Nano> <message>`` as its time and message; blank lines give None (the Go parser
    drops them). A line without a valid prefix is all message, at ``now``.

    A structured ``time="..." level="..." msg="..."`` message keeps the application's own time.
    """
    line = line.strip()
    if not line:
        return None
    stamp_text, _, message = line.partition(" ")
    stamp = parse_timestamp(stamp_text)
    if stamp is None:
        stamp, message = now, line
    if message.startswith("time="):
        structured = _STRUCTURED.match(message)
        if structured:
            own = parse_timestamp(structured.group("time"))
            if own is not None:
                stamp = own
                message = message[structured.end("time") + 2 :]
    message = message.strip()
    if not message:
        return None
    return stamp, message


def parse_line(line: str, stream: OutputStream, now: datetime) -> LogEntry | None:
    """:func:`split_line` as a ``LogEntry`` of ``stream``."""
    split = split_line(line, now)
    if split is None:
        return None
    return LogEntry(timestamp=split[0], message=split[1], output_stream=stream)


def coalesce(batches: list[Log]) -> list[Log]:
    """One Log per container in first-seen order, lines in arrival order; silent containers keep ``logs: null``."""
    merged: dict[str, Log] = {}
    lines: dict[str, list[LogEntry]] = {}
    for batch in batches:
        if batch.container_id not in merged:
            merged[batch.container_id] = batch
            lines[batch.container_id] = []
        if batch.logs:
            lines[batch.container_id].extend(batch.logs)
    return [log.model_copy(update={"logs": lines[cid] or None}) for cid, log in merged.items()]


def of_attempt(batches: list[Log], attempt: int | None) -> list[Log]:
    """The batches one attempt wrote (all of them when ``attempt`` is None: a job the event log does not know).

    A retried job's stream holds every attempt's batches; clients read the Logs positionally (``logs[1]`` is the
    second step), so a view mixing a dead attempt's steps with the final one's would put the wrong output in each
    slot. Batches from before attempts were recorded belong to every attempt, as they were shown before.
    """
    if attempt is None:
        return batches
    return [batch for batch in batches if batch.attempt in (attempt, None)]


@dataclass
class LogBudget:
    """How much output one job attempt may keep: a cap per line and for the whole job.

    Nothing is dropped silently: a cut line says where it was cut, the first line over the job's cap is replaced
    by a notice, and the number of lines dropped is reported when the step ends.
    """

    max_job_bytes: int = 16 * 1024 * 1024
    max_line_bytes: int = MAX_LINE_BYTES
    used: int = 0
    dropped: int = 0

    def admit(self, message: str) -> str | None:
        """The line as it may be kept (possibly cut, or a notice), or None when the job's cap is used up."""
        size = len(message) if message.isascii() else len(message.encode())  # isascii is O(1): no copy per line
        if size > self.max_line_bytes:
            message = message.encode()[: self.max_line_bytes].decode(errors="ignore")
            message += f" [hades: line cut at {self.max_line_bytes} of {size} bytes]"
            size = len(message.encode())
        if self.used + size <= self.max_job_bytes:
            self.used += size
            return message
        self.dropped += 1
        if self.dropped == 1:
            return f"[hades: this job's log reached its limit of {self.max_job_bytes} bytes; further output is dropped]"
        return None

    def closing_notice(self) -> str | None:
        """Said once when a step ends after lines were dropped."""
        if self.dropped <= 1:
            return None
        return f"[hades: {self.dropped - 1} lines dropped after the log limit of {self.max_job_bytes} bytes]"
