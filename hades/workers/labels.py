"""An executor's labels: what it detects of its machine, then what ``HADES_EXECUTOR_LABELS`` says (which wins)."""

from __future__ import annotations

import contextlib
import os
import platform

from hades.core.constraints import parse_labels

#: ``platform.machine()`` in Go's (and Nomad's ``cpu.arch``) words.
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i386": "386", "i686": "386"}


def executor_labels(configured: str) -> dict[str, str]:
    """This executor's labels: detected ``os``, ``arch``, ``cpu`` (cores) and ``memory`` (``<MiB>m``), then the
    ``HADES_EXECUTOR_LABELS`` ones, which win. Raises ``LabelError`` for a malformed setting."""
    machine = platform.machine().lower()
    detected = {"os": platform.system().lower(), "arch": _ARCH.get(machine, machine), "cpu": str(os.cpu_count() or 1)}
    with contextlib.suppress(ValueError, OSError, AttributeError):  # not every system answers sysconf
        detected["memory"] = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**20}m"
    return detected | parse_labels(configured)
