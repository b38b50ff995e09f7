"""CPU and memory limits as Kubernetes quantities, meaning what they mean on Docker.

A job's ``memory_limit`` is parsed as the Go Hades parses it for Docker (``2G`` and ``2g`` are 2×1024³ bytes,
``512M`` and ``512m`` 512×1024² bytes) and written in binary units (``2Gi``, ``512Mi``). Passing the string
through, as the Go scheduler did, made ``2G`` mean 2×10⁹ bytes and ``512m`` half a byte.
"""

from __future__ import annotations

from hades.core.memory import MemoryFormatError, parse_memory

__all__ = ["MemoryFormatError", "cpu_quantity", "memory_quantity"]

_GI = 1024**3
_MI = 1024**2


def memory_quantity(limit: str) -> str | None:
    """The quantity for a memory limit string; None for an empty or zero limit (no limit, as on Docker).

    Raises MemoryFormatError with the Go message for anything Docker would refuse too.
    """
    if not limit:
        return None
    return bytes_quantity(parse_memory(limit))


def bytes_quantity(count: int) -> str | None:
    """A byte count in the largest binary unit that holds it exactly; None for zero."""
    if count <= 0:
        return None
    if count % _GI == 0:
        return f"{count // _GI}Gi"
    if count % _MI == 0:
        return f"{count // _MI}Mi"
    return str(count)


def cpu_quantity(cores: int) -> str | None:
    """Whole cores as a quantity (``2``); None for zero (no limit)."""
    return str(cores) if cores > 0 else None
