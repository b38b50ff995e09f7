"""A job's steps, and the Go scalar types the job's models share (the job in ``hades.core.spec``, a pipeline's
stages in ``hades.core.stages``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from hades.core.memory import INT64_MAX, INT64_MIN, MemoryFormatError, parse_memory

__all__ = ["GoStruct", "Int64", "Metadata", "Step", "UInt64"]

_UINT64_MAX = 2**64 - 1
Int64 = Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX)]
UInt64 = Annotated[StrictInt, Field(ge=0, le=_UINT64_MAX)]
Metadata = dict[StrictStr, StrictStr]


class GoStruct(BaseModel):
    """The models validate in pydantic's core alone (no Python validators), so the events that carry a spec decode
    fast; Go's reading of a request body (nulls, UUID and time forms, repeated keys) is ``parse_job_request``'s."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Step(GoStruct):
    """One container run of a job, with the Go field names and types."""

    id: Int64 = 0
    name: StrictStr = ""
    image: StrictStr = ""
    script: StrictStr = ""
    continue_on_error: StrictBool = False
    metadata: Metadata = Field(default_factory=dict)
    cpu_limit: UInt64 = 0
    memory_limit: StrictStr = ""
    network: StrictStr = ""
    memory_swap: StrictStr = ""
    pids_limit: Int64 = 0

    @property
    def memory_bytes(self) -> int | None:
        """The memory limit in bytes; None when it is empty or does not parse (Go: no limit)."""
        return _bytes_or_none(self.memory_limit)

    @property
    def memory_swap_bytes(self) -> int | None:
        """The memory+swap limit in bytes; None when it is empty or does not parse (Go: no limit)."""
        return _bytes_or_none(self.memory_swap)


def _bytes_or_none(limit: str) -> int | None:
    if not limit:
        return None
    try:
        return parse_memory(limit)
    except MemoryFormatError:
        return None
