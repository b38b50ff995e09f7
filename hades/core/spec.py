"""The job a client submits to ``POST /build``: its models, and the Go Hades's validation message for message.

``validate_job_spec`` checks a decoded job in the Go order and returns the exact plain-text 400 body of the Go API
for its first problem. Reading the body itself (Go's encoding/json rules) is ``hades.core.go_request``, whose
``parse_job_request`` and ``parse_stages_request`` can still be imported from here.
"""

from __future__ import annotations

import functools
import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import (
    AwareDatetime,
    Field,
    StrictStr,
    field_serializer,
)

from hades.core.artifacts import (
    ArtifactsWhen,
    Input,
    artifacts_problem,
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

if TYPE_CHECKING:
    from hades.core.go_request import parse_job_request, parse_stages_request

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
#: Names that moved to ``hades.core.go_request``, still importable from here (the tests and the benchmarks use them).
#: Read lazily: that module reads this one's models, so importing it at the top would be a cycle.
_FROM_GO_REQUEST = frozenset({"parse_job_request", "parse_stages_request"})


def __getattr__(name: str) -> Any:
    """``parse_job_request`` and ``parse_stages_request``, from ``hades.core.go_request`` (PEP 562)."""
    if name in _FROM_GO_REQUEST:
        from hades.core import go_request

        return getattr(go_request, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# -- validation, in the Go order -----------------------------------------------------------------------------


def validate_job_spec(spec: JobSpec) -> str | None:
    """The Go API's first complaint about a decoded job (its 400 body), or None when the job is valid.

    The order is Go's: the name, the timeout, then each step in array order, then the callback URL; the
    job-status webhook's URL (ours, not Go's) is checked like the callback URL; the constraints and resources,
    then the artifacts and inputs, then a pipeline's stages (ours too), and last (ours) what would only fail at
    run time: no steps, a step without an image, a repeated step id, a metadata key no environment can hold.
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
        or _runnable_problem(spec)
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


def _runnable_problem(spec: JobSpec) -> str | None:
    """What the Go API accepts but no executor can run (ours; the Go CRD requires steps and images too): a job
    without steps (a pipeline's steps are in its stages), a step without an image, a step id used twice (0, no id,
    may repeat: Go clients leave ids out), a metadata key that cannot be an environment variable."""
    if not spec.steps and not spec.stages:
        return "Invalid steps: a job needs at least one step"
    problem = _metadata_problem("metadata", spec.metadata)
    ids: set[int] = set()
    for index, step in enumerate(spec.steps):
        if problem is not None:
            return problem
        problem = _runnable_step_problem(f"steps[{index}]", step, ids)
        ids.add(step.id)
    return problem


def _runnable_step_problem(where: str, step: Step, earlier_ids: set[int]) -> str | None:
    if not step.image:
        return f"Invalid {where}.image: a step needs an image to run in"
    if step.id and step.id in earlier_ids:  # 0 is no id, and steps without one are fine
        return f"Invalid {where}.id: step id {step.id} is used by an earlier step"
    return _metadata_problem(f"{where}.metadata", step.metadata)


def _metadata_problem(where: str, metadata: dict[str, str]) -> str | None:
    """Metadata keys become environment variable names: empty, or with ``=`` or NUL, no process can be given one."""
    for key in metadata:
        if not key or "=" in key or "\0" in key:
            return f"Invalid {where}: key {key!r} cannot be an environment variable name (empty, or has = or NUL)"
    return None


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
