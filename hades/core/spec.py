"""The job a client submits to ``POST /build``: its models, and the Go Hades's validation message for message.

``parse_job_request`` is the one entry point. It decodes the body as Go's encoding/json decodes into the Go
structs (strict types, int64 ranges, case-insensitive field names, ``null`` leaves a field as it was, unknown
fields ignored), then checks the job in the Go order. Every failure is a SpecError whose message is the exact
plain-text 400 body of the Go API.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import (
    AwareDatetime,
    Field,
    StrictStr,
    ValidationError,
    field_serializer,
)

from hades.core.artifacts import (
    ArtifactsWhen,
    Input,
    artifacts_problem,
    decode_artifacts,
    decode_inputs,
    decode_when,
)
from hades.core.constraints import (
    Constraint,
    Placement,
    Resources,
    constraints_problem,
    placement_of,
    resources_problem,
)
from hades.core.errors import SpecError
from hades.core.memory import MemoryFormatError, parse_memory
from hades.core.stages import Stage, stages_problem
from hades.core.steps import GoStruct, Int64, Metadata, Step
from hades.core.urls import validate_callback_url

__all__ = [
    "INVALID_JSON_BODY",
    "MAX_TIMEOUT_SECONDS",
    "JobSpec",
    "Priority",
    "SpecError",
    "Step",
    "is_valid_network",
    "parse_job_request",
    "parse_stages_request",
    "validate_callback_url",
    "validate_job_spec",
]

#: The largest timeout whose nanoseconds still fit in an int64.
MAX_TIMEOUT_SECONDS = 9223372036
#: The body of every 400 caused by a body that does not decode into the job structs.
INVALID_JSON_BODY = "Invalid JSON body"
_INVALID_NETWORK = "invalid network mode: must be none, bridge, host, default, or a valid network name"


class Priority(StrEnum):
    """The queue a job waits in; checked high first, then medium, then low."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @classmethod
    def from_int(cls, n: int) -> Priority:
        """Go's mapping: 3 and above is high, 1 and below is low, 2 is medium."""
        if n >= 3:
            return cls.HIGH
        return cls.LOW if n <= 1 else cls.MEDIUM

    @property
    def as_int(self) -> int:
        """The number Go writes for this priority: high 3, medium 2, low 1."""
        return {Priority.HIGH: 3, Priority.MEDIUM: 2}.get(self, 1)


# -- Go scalar types -----------------------------------------------------------------------------------------

_UUID36 = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_UUID32 = re.compile(rb"[0-9a-fA-F]{32}")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _go_uuid(value: object) -> object:
    """Read a UUID string as github.com/google/uuid does.

    It takes the plain form, ``urn:uuid:`` plus it, it wrapped in one character each side, or 32 hex digits.
    """
    if value is None or isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise ValueError("a UUID must be a string")
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) == 45 and raw[:9].lower() == b"urn:uuid:":
        raw = raw[9:]
    elif len(raw) == 38:
        raw = raw[1:37]  # Go drops the first and last byte without looking at them
    if _UUID36.fullmatch(raw) or _UUID32.fullmatch(raw):
        return UUID(raw.decode())
    raise ValueError(f"invalid UUID: {value!r}")


def _go_time(value: object) -> object:
    """Read a timestamp as Go's time.Time.UnmarshalJSON does: strict RFC 3339, always with a zone."""
    if value is None or (isinstance(value, datetime) and value.tzinfo is not None):
        return value
    if not isinstance(value, str):
        raise ValueError("a timestamp must be an RFC 3339 string with a zone")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    micros = int((match[7] or "")[:6].ljust(6, "0"))  # Go keeps nanoseconds; Python has microseconds
    return datetime(year, month, day, hour, minute, second, micros, tzinfo=_go_zone(match[8]))


def _go_zone(zone: str) -> timezone:
    if zone == "Z":
        return UTC
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(f"zone offset out of range: {zone}")
    offset = timedelta(hours=hours, minutes=minutes)
    return timezone(-offset if zone[0] == "-" else offset)


class JobSpec(GoStruct):
    """A job as submitted (Go's RESTPayload): its steps run in array order.

    ``constraints`` and ``resources`` are ours (executor pools, ``hades.core.constraints``), and so are
    ``artifacts``, ``artifacts_when`` and ``inputs`` (``hades.core.artifacts``), and ``stages`` (a pipeline,
    ``hades.core.stages``); Go clients never send them, and a job without them is stored exactly as before.
    """

    id: UUID | None = None
    name: StrictStr = ""
    timestamp: AwareDatetime | None = None
    metadata: Metadata = Field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    callback_url: StrictStr = ""
    status_callback_url: StrictStr = ""
    timeout_seconds: Int64 = 0
    priority: Int64 = 3
    constraints: tuple[Constraint, ...] = Field(default=(), exclude_if=lambda value: not value)
    resources: Resources | None = Field(default=None, exclude_if=lambda value: value is None)
    artifacts: tuple[StrictStr, ...] = Field(default=(), exclude_if=lambda value: not value)
    artifacts_when: ArtifactsWhen = Field(default=ArtifactsWhen.ALWAYS, exclude_if=lambda v: v == ArtifactsWhen.ALWAYS)
    inputs: tuple[Input, ...] = Field(default=(), exclude_if=lambda value: not value)
    stages: tuple[Stage, ...] = Field(default=(), exclude_if=lambda value: not value)

    @property
    def is_pipeline(self) -> bool:
        """A pipeline: its stages run as jobs of their own (``hades.core.stages``); it is never queued itself."""
        return bool(self.stages)

    @property
    def priority_name(self) -> Priority:
        """The queue this job's priority number maps to."""
        return Priority.from_int(self.priority)

    @functools.cached_property
    def placement(self) -> Placement | None:
        """Where the job may run, normalised (its pool); None when any executor may take it."""
        return placement_of(self.constraints, self.resources)

    @field_serializer("id", when_used="json")
    def _id_as_text(self, value: object) -> str | None:
        """Write the id as text even if it was set (via model_copy) to a plain string."""
        return None if value is None else str(value)


# -- decoding, as encoding/json decodes into the Go structs --------------------------------------------------


@dataclass(frozen=True, slots=True)
class _JSONObject:
    """A JSON object: its members in document order, repeated keys kept (Go decodes every one of them)."""

    members: list[tuple[str, Any]]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Go matches field names case-insensitively: ASCII letters, plus the four runes that fold onto ASCII ones.
_FOLD = str.maketrans(
    {chr(c): chr(c - 32) for c in range(ord("a"), ord("z") + 1)}
    | {"\u017f": "S", "\u212a": "K", "\u0130": "I", "\u0131": "I"}
)
_FOLDED_FIELDS = {
    model: {name.translate(_FOLD): name for name in model.model_fields} for model in (JobSpec, Step, Stage)
}
_Model = type[JobSpec] | type[Step] | type[Stage]


def _bind_error() -> SpecError:
    return SpecError(INVALID_JSON_BODY)


def _go_text(s: str) -> str:
    """Go decodes an unpaired surrogate escape to U+FFFD; Python keeps it, and nothing can encode it later."""
    return _LONE_SURROGATE.sub("\ufffd", s)


def _json_object(pairs: list[tuple[str, Any]]) -> _JSONObject:
    return _JSONObject([(_go_text(key), _go_text(v) if isinstance(v, str) else v) for key, v in pairs])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_json(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
        return json.loads(text, object_pairs_hook=_json_object, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _bind_error() from exc


def _field_name(model: _Model, key: str) -> str | None:
    """The field a JSON key sets: an exact match first, else a case-insensitive one, as in Go."""
    if key in model.model_fields:
        return key
    return _FOLDED_FIELDS[model].get(key.translate(_FOLD))


def _decode_struct(model: _Model, value: Any, into: dict[str, Any]) -> dict[str, Any]:
    """Decode a JSON object into (a copy of) ``into``; like Go, a repeated key decodes again on top."""
    if not isinstance(value, _JSONObject):
        raise _bind_error()
    decoded = dict(into)
    for key, member in value.members:
        name = _field_name(model, key)
        # Unknown keys are skipped; null leaves the field as it was.
        if name is not None and member is not None:
            decoded[name] = _decode_field(model, name, member, decoded.get(name))
    return decoded


def _decode_field(model: _Model, name: str, value: Any, current: Any) -> Any:
    if name == "metadata":
        return _decode_metadata(value, current or {})
    if name == "steps":
        return _decode_steps(value, current or [])
    if name == "constraints":
        return _decode_constraints(value)
    if name == "resources":
        return _decode_resources(value)
    if name == "stages" and model is JobSpec:
        return _decode_stages(value)
    if name == "needs" and model is Stage:
        return _decode_needs(value)
    if name in _ARTIFACT_DECODERS:
        return _ARTIFACT_DECODERS[name](value)
    try:  # a scalar: Go's reading of ids and times, then the model's own field definition
        read = _GO_READERS.get(name) if model is JobSpec else None
        return getattr(model.model_validate({name: read(value) if read else value}), name)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise _bind_error() from exc


_GO_READERS: dict[str, Callable[[object], object]] = {"id": _go_uuid, "timestamp": _go_time}


def _decode_metadata(value: Any, current: dict[str, str]) -> dict[str, str]:
    if not isinstance(value, _JSONObject):
        raise _bind_error()
    merged = dict(current)  # Go decodes into the map it already has
    for key, item in value.members:
        if item is not None and not isinstance(item, str):
            raise _bind_error()
        merged[key] = item or ""  # Go stores "" for a null map value
    return merged


def _decode_steps(value: Any, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _bind_error()
    steps = []
    for index, item in enumerate(value):  # Go decodes element i on top of the existing element i
        existing = current[index] if index < len(current) else {}
        steps.append(existing if item is None else _decode_struct(Step, item, existing))
    return steps


# Ours, not Go's: decoding errors of these name the problem instead of "Invalid JSON body". Nomad's JSON API
# names (LTarget, Operand, RTarget) are read too.
_CONSTRAINT_KEYS = {
    "attribute": "attribute",
    "ltarget": "attribute",
    "operator": "operator",
    "operand": "operator",
    "value": "value",
    "rtarget": "value",
}
_CONSTRAINTS_SHAPE = 'must be a list of objects such as {"attribute": "os", "operator": "=", "value": "linux"}'


def _decode_constraints(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not all(isinstance(item, _JSONObject) for item in value):
        raise SpecError(f"Invalid constraints: {_CONSTRAINTS_SHAPE}")
    constraints = []
    for index, item in enumerate(value):
        fields: dict[str, str] = {}
        for key, member in item.members:
            name = _CONSTRAINT_KEYS.get(key.lower())
            if name is None or member is None:
                continue
            if not isinstance(member, str):
                raise SpecError(f"Invalid constraints[{index}]: {key} must be a string")
            fields[name] = member
        constraints.append(fields)
    return constraints


def _decode_resources(value: Any) -> dict[str, Any]:
    if not isinstance(value, _JSONObject):
        raise SpecError('Invalid resources: must be an object such as {"cpu": 2, "memory": "4g"}')
    fields: dict[str, Any] = {}
    for key, member in value.members:
        name = key.lower()
        if name == "cpu" and member is not None:
            number = isinstance(member, int | float) and not isinstance(member, bool)
            if not number or not math.isfinite(member):
                raise SpecError("Invalid resources: cpu must be a number of cores")
            fields["cpu"] = member
        elif name == "memory" and member is not None:
            if not isinstance(member, str):
                raise SpecError('Invalid resources: memory must be a size string such as "512m" or "2g"')
            fields["memory"] = member
    return fields


_STAGES_SHAPE = 'must be a list of objects such as {"name": "build", "steps": [...], "needs": []}'


def _decode_stages(value: Any) -> list[dict[str, Any]]:
    """``stages`` (ours): a list of objects, each decoded as the job's own fields are, plus ``name`` and ``needs``."""
    if not isinstance(value, list) or not all(isinstance(item, _JSONObject) for item in value):
        raise SpecError(f"Invalid stages: {_STAGES_SHAPE}")
    return [_decode_struct(Stage, item, {}) for item in value]


def _decode_needs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError('Invalid needs: must be a list of stage names, such as ["build"]')
    return list(value)


_ARTIFACT_DECODERS: dict[str, Callable[[Any], Any]] = {
    "artifacts": decode_artifacts,
    "artifacts_when": decode_when,
    "inputs": lambda value: decode_inputs(value, lambda item: item.members if isinstance(item, _JSONObject) else None),
}


def _decode_job(body: bytes) -> JobSpec:
    raw = _load_json(body)
    top = _JSONObject([]) if raw is None else raw  # Go: a top-level null decodes to the zero struct
    fields = _decode_struct(JobSpec, top, {})
    try:
        return JobSpec.model_validate(fields)
    except ValidationError as exc:
        raise _bind_error() from exc


def parse_stages_request(body: bytes) -> tuple[tuple[Stage, ...], str | None]:
    """Decode a ``POST /jobs/{id}/stages`` body: ``{"stages": [...], "stage": "<the adding stage>"}``; the stages
    decode as a pipeline's do. Raises SpecError naming the problem (the checks against the pipeline come later)."""
    raw = _load_json(body)
    if not isinstance(raw, _JSONObject):
        raise SpecError(f'Invalid body: must be an object such as {{"stages": [...]}}; stages {_STAGES_SHAPE}')
    members = {key.lower(): value for key, value in raw.members}
    by = members.get("stage")
    if by is not None and not isinstance(by, str):
        raise SpecError("Invalid stage: must be the adding stage's name (its HADES_STAGE)")
    decoded = _decode_stages(members.get("stages"))
    if not decoded:
        raise SpecError("Invalid stages: name at least one stage to add")
    try:
        return tuple(Stage.model_validate(fields) for fields in decoded), by
    except ValidationError as error:
        raise _bind_error() from error


# -- validation, in the Go order -----------------------------------------------------------------------------


def parse_job_request(body: bytes) -> JobSpec:
    """Decode and validate a ``POST /build`` body.

    Raises SpecError whose message is the Go API's plain-text 400 body: ``Invalid JSON body`` for anything
    that does not decode (empty, not UTF-8, not JSON, wrong types, out-of-range integers), otherwise the
    first problem ``validate_job_spec`` finds.
    """
    spec = _decode_job(body)
    problem = validate_job_spec(spec)
    if problem is not None:
        raise SpecError(problem)
    return spec


def validate_job_spec(spec: JobSpec) -> str | None:
    """The Go API's first complaint about a decoded job (its 400 body), or None when the job is valid.

    The order is Go's: the name, the timeout, then each step in array order, then the callback URL; the
    job-status webhook's URL (ours, not Go's) is checked like the callback URL; the constraints and resources,
    then the artifacts and inputs, then a pipeline's stages (ours too) come last.
    """
    if not spec.name:
        return 'Invalid request payload: "name" is required'
    if spec.timeout_seconds < 0:
        return "timeout_seconds cannot be negative"
    if spec.timeout_seconds > MAX_TIMEOUT_SECONDS:
        return f"timeout_seconds must not exceed {MAX_TIMEOUT_SECONDS}"
    for step in spec.steps:
        problem = _step_problem(step)
        if problem is not None:
            return problem
    for field, url in (("callback_url", spec.callback_url), ("status_callback_url", spec.status_callback_url)):
        reason = validate_callback_url(url) if url else None
        if reason is not None:
            return f"Invalid {field}: {reason}"
    return (
        constraints_problem(spec.constraints)
        or resources_problem(spec.resources)
        or artifacts_problem(spec.artifacts, spec.inputs)
        or _pipeline_problem(spec)
    )


def _pipeline_problem(spec: JobSpec) -> str | None:
    """A pipeline's problems (ours): steps or stages, not both; artifacts and inputs belong to its stages."""
    if not spec.stages:
        return None
    if spec.steps:
        return "Invalid stages: a job has steps or stages, not both"
    if spec.artifacts or spec.inputs:
        field = "artifacts" if spec.artifacts else "inputs"
        return f"Invalid {field}: a pipeline keeps and reads artifacts in its stages; declare {field} there"
    return stages_problem(spec, spec.stages, validate_job_spec)


def _step_problem(step: Step) -> str | None:
    problem = _memory_problem(step)
    if problem is not None:
        return problem
    if step.pids_limit < 0:
        return "pids_limit cannot be negative"
    return None if is_valid_network(step.network) else _INVALID_NETWORK


def _memory_problem(step: Step) -> str | None:
    try:
        memory = parse_memory(step.memory_limit) if step.memory_limit else None
    except MemoryFormatError:
        return "Failed to parse RAM limit"
    if not step.memory_swap:
        return None
    try:
        swap = parse_memory(step.memory_swap)
    except MemoryFormatError:
        return "Failed to parse memory_swap limit"
    if memory is None:
        return "memory_swap requires memory_limit to be set"
    return "memory_swap must be greater than or equal to memory_limit" if swap < memory else None


_NETWORK = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")


def is_valid_network(network: str) -> bool:
    """Empty (the executor's default) or a Docker network name; none, bridge, host and default are names."""
    return not network or _NETWORK.fullmatch(network) is not None


# -- callback URL --------------------------------------------------------------------------------------------
