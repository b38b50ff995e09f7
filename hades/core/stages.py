"""A pipeline's stages: the model, the checks, and the ordinary job each stage runs as.

A job may declare ``stages`` instead of ``steps``. Each stage is a job of its own (``steps``, ``timeout_seconds``,
``constraints``, ``resources``, ``artifacts``, ``inputs``, ``metadata``, ``priority``) with a ``name`` unique in
the pipeline and ``needs``: absent, the stage before it (so stages run in order by default); ``[]``, none (it starts
at once); otherwise stages declared before it (so the graph has no cycle, by construction). An input
``"<stage>:<path>"`` reads an artifact of a stage the reader needs, directly or through others.

Each stage runs as a job whose id is ``uuid5(pipeline id, stage name)``; :func:`stage_spec` derives its spec. Pure:
no I/O, and the pipeline's own ``JobSpec`` type comes in from the caller (``hades.core.spec`` imports this module).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictStr

from hades.core.artifacts import ArtifactsWhen, Input
from hades.core.constraints import Constraint, Resources
from hades.core.steps import GoStruct, Int64, Metadata, Step

if TYPE_CHECKING:
    from hades.core.spec import JobSpec

__all__ = [
    "DEFAULT_MAX_STAGES",
    "STAGE_NAME",
    "Stage",
    "resolved_needs",
    "stage_job_id",
    "stage_spec",
    "stages_problem",
]

#: ``MAX_PIPELINE_STAGES``'s default: declared plus added stages of one pipeline.
DEFAULT_MAX_STAGES = 50
STAGE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
#: The id validation gives a pipeline that has none yet (stage inputs are rewritten to stage job ids under it).
_CHECK_ID = "00000000-0000-4000-8000-000000000000"


class Stage(GoStruct):
    """One stage of a pipeline: a job's own fields, a ``name`` and what it ``needs``."""

    name: StrictStr = ""
    needs: tuple[StrictStr, ...] | None = None
    steps: tuple[Step, ...] = ()
    metadata: Metadata = Field(default_factory=dict)
    timeout_seconds: Int64 = 0
    priority: Int64 | None = None
    constraints: tuple[Constraint, ...] = ()
    resources: Resources | None = None
    artifacts: tuple[StrictStr, ...] = ()
    artifacts_when: ArtifactsWhen = ArtifactsWhen.ALWAYS
    inputs: tuple[Input, ...] = ()


def stage_job_id(pipeline_id: str, name: str) -> str:
    """The id of the job a stage runs as: the same for every scheduler that launches it."""
    return str(uuid.uuid5(uuid.UUID(pipeline_id), name))


def resolved_needs(stages: Sequence[Stage]) -> dict[str, tuple[str, ...]]:
    """Each stage's needs, by name: absent ``needs`` is the stage before it (none for the first)."""
    needs: dict[str, tuple[str, ...]] = {}
    previous: str | None = None
    for stage in stages:
        if stage.needs is not None:
            needs[stage.name] = tuple(dict.fromkeys(stage.needs))
        else:
            needs[stage.name] = (previous,) if previous is not None else ()
        previous = stage.name
    return needs


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _stage_input(item: Input) -> str | None:
    """The stage an input reads from (``"<stage>:<path>"``), None for a URL or a job id."""
    if item.is_url:
        return None
    prefix, colon, _ = item.source.partition(":")
    return prefix if colon and not _is_uuid(prefix) else None


def stage_spec(pipeline: JobSpec, stage: Stage, pipeline_id: str) -> JobSpec:
    """The spec of the job a stage runs as. Unset fields come from the pipeline (its metadata under the stage's,
    timeout, priority, constraints, resources); callbacks stay with the pipeline, which reports once at its end;
    stage-named inputs are rewritten to the stage job ids."""
    inputs = []
    for item in stage.inputs:
        named = _stage_input(item)
        if named is not None:
            path = item.source.partition(":")[2]
            item = Input(source=f"{stage_job_id(pipeline_id, named)}:{path}", destination=item.destination)
        inputs.append(item)
    fields: dict[str, Any] = {
        "id": uuid.UUID(stage_job_id(pipeline_id, stage.name)),
        "name": f"{pipeline.name}/{stage.name}",
        "metadata": {**pipeline.metadata, **stage.metadata},
        "steps": stage.steps,
        "timeout_seconds": stage.timeout_seconds or pipeline.timeout_seconds,
        "priority": pipeline.priority if stage.priority is None else stage.priority,
        "constraints": stage.constraints or pipeline.constraints,
        "resources": stage.resources or pipeline.resources,
        "artifacts": stage.artifacts,
        "artifacts_when": stage.artifacts_when,
        "inputs": tuple(inputs),
    }
    return type(pipeline).model_validate(fields)


def stages_problem(
    pipeline: JobSpec,
    stages: Sequence[Stage],
    validate: Callable[[JobSpec], str | None],
    before: Sequence[Stage] = (),
    limit: int | None = None,
) -> str | None:
    """The first problem with ``stages`` (declared, or added after the stages ``before``), as a 400 body naming the
    field; ``validate`` checks each stage's job as any job is checked. None when they are fine."""
    total = len(before) + len(stages)
    if limit is not None and total > limit:
        return f"Invalid stages: a pipeline has at most {limit} stages (MAX_PIPELINE_STAGES), not {total}"
    known = resolved_needs(before)
    order = list(before)
    for index, stage in enumerate(stages):
        where = f"stages[{index}]"
        problem = _stage_shape_problem(stage, known, where)
        if problem is not None:
            return problem
        order.append(stage)
        known = resolved_needs(order)
        problem = _inputs_problem(stage, known, where)
        if problem is not None:
            return problem
        problem = validate(stage_spec(pipeline, stage, _CHECK_ID))
        if problem is not None:
            return f"Invalid {where} ({stage.name}): {problem}"
    return None


def _stage_shape_problem(stage: Stage, known: dict[str, tuple[str, ...]], where: str) -> str | None:
    if STAGE_NAME.fullmatch(stage.name) is None:
        return f"Invalid {where}.name: {stage.name!r} must match {STAGE_NAME.pattern}"
    if stage.name in known:
        return f"Invalid {where}.name: stage {stage.name!r} is declared twice"
    for need in stage.needs or ():
        if need not in known:
            return f"Invalid {where}.needs: {need!r} is not a stage declared before {stage.name!r}"
    if not stage.steps:
        return f"Invalid {where}.steps: stage {stage.name!r} has no steps"
    return None


def _inputs_problem(stage: Stage, known: dict[str, tuple[str, ...]], where: str) -> str | None:
    upstream = _upstream(stage.name, known)
    for index, item in enumerate(stage.inputs):
        named = _stage_input(item)
        if named is not None and named not in upstream:
            return (
                f"Invalid {where}.inputs[{index}]: {item.source!r} reads stage {named!r}, "
                f"which stage {stage.name!r} does not need"
            )
    return None


def _upstream(name: str, needs: dict[str, tuple[str, ...]]) -> set[str]:
    """Every stage ``name`` needs, directly or through others."""
    seen: set[str] = set()
    todo = list(needs.get(name, ()))
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(needs.get(current, ()))
    return seen
