"""One ``hades up`` per data folder: two embedded nats-servers writing one JetStream store lose each other's jobs.

The owner holds an exclusive ``flock`` on ``hades.lock`` in the folder for its whole life, and hands the lock's file
to its nats-server, so the folder stays held until the last writer of the store is gone. The kernel releases it when
they end in any way, SIGKILL included, so a crashed owner never blocks the next start and no stale-pid guess is
needed; the pid written into the file only names the holder in the refusal.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "hades.lock"


class DataDirInUse(RuntimeError):
    """Another process holds the data folder: the message names the folder and its pid."""


class DataDirLock:
    """The held lock; it lasts as long as this object's file stays open (the process, in ``hades up``)."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirInUse(
                f"HADES_DATA_DIR {data_dir} is in use by another `hades up` (pid {holder}): stop it, or set "
                "HADES_DATA_DIR to another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    @property
    def fd(self) -> int:
        """The lock's open file, for a child that must hold the folder as long as it runs (``pass_fds``)."""
        return self._fd

    def release(self) -> None:
        """Let the next owner in (the kernel does it anyway when the process ends)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
