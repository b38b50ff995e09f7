"""The process executor's workspace directories, emptied ones kept for the next attempts.

Creating a directory costs ext4 an inode allocation that passes over every inode deleted in the last minutes (it
keeps them for a while before reusing them): at a hundred jobs a second, a ``mkdir`` and its ``rmdir`` took about
a tenth of the executor's CPU. A workspace that its steps left empty is instead renamed aside and renamed into
place for a later attempt, which allocates nothing. One that holds anything, or whose mode or owner a step
changed, is removed as before, so an attempt always starts in an empty directory as a fresh one would be made.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import stat

#: Emptied workspaces kept, at most (a few beyond the attempts an executor runs at once).
SPARES = 64
#: How the kept ones are named inside the executor's root (no job id starts with a dot).
SPARE_PREFIX = ".spare-"


class Workspaces:
    """Makes and removes workspace directories under ``root``, reusing emptied ones."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._spares: list[str] = []
        self._names = itertools.count()
        self._fresh: tuple[int, int, int] | None = None  # mode, owner and group of a directory made here

    def make(self, path: str) -> None:
        """An empty directory at ``path`` (raises OSError when none can be made)."""
        while self._spares:
            spare = self._spares.pop()
            try:
                os.rename(spare, path)  # takes the place of an empty directory of that name, never a full one
                return
            except FileNotFoundError:
                continue  # removed behind our back
            except OSError:
                self._spares.append(spare)
                break
        os.makedirs(path, exist_ok=True)
        if self._fresh is None:
            self._fresh = _identity(os.stat(path))

    async def remove(self, path: str) -> None:
        """Remove the directory (kept aside when it is empty and as made); on the loop when it is empty (one system
        call, where a thread hop cost more than the work), else in a thread."""
        if self._keep(path):
            return
        try:
            os.rmdir(path)
        except FileNotFoundError:
            return
        except OSError:  # not empty
            await asyncio.to_thread(shutil.rmtree, path, True)

    @staticmethod
    def is_spare(name: str) -> bool:
        """Whether an entry of the root is a kept workspace rather than an attempt's."""
        return name.startswith(SPARE_PREFIX)

    def _keep(self, path: str) -> bool:
        if len(self._spares) >= SPARES or self._fresh is None:
            return False
        try:
            if _identity(os.stat(path)) != self._fresh:
                return False
            with os.scandir(path) as entries:
                if next(entries, None) is not None:
                    return False
            spare = os.path.join(self._root, f"{SPARE_PREFIX}{next(self._names)}")
            os.rename(path, spare)
        except OSError:
            return False
        self._spares.append(spare)
        return True


def _identity(status: os.stat_result) -> tuple[int, int, int]:
    return stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid
