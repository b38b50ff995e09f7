"""Calls to a Docker engine that may refuse, go away, or outlive the caller: what its failures mean, and the calls
that must not be cut short by a cancellation.

An engine that refuses answers with a status (404: no such object); one that cannot be reached at all shows up as
aiodocker's status 900, or as the connection's own error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
from aiodocker.containers import DockerContainer
from aiodocker.exceptions import DockerError

T = TypeVar("T")
#: What an engine call raises when the engine refuses, or cannot be reached at all.
ENGINE_TROUBLE = (DockerError, aiohttp.ClientError, OSError)
_AIODOCKER_UNREACHABLE = 900
NOT_FOUND = 404


async def settled(operation: Awaitable[T]) -> T:
    """Await an engine call that creates something; if cancelled meanwhile, let it land before re-raising, so
    the cleanup that follows sees (and removes) what it created instead of racing it."""
    task = asyncio.ensure_future(operation)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise


def unreachable(error: BaseException) -> bool:
    """The engine did not answer at all (aiodocker reports that as status 900), as opposed to refusing."""
    return not isinstance(error, DockerError) or error.status == _AIODOCKER_UNREACHABLE


def describe(error: BaseException) -> str:
    """The engine's message for a refusal; the error's type and text otherwise."""
    return error.message if isinstance(error, DockerError) else f"{type(error).__name__}: {error}"


async def kill(container: DockerContainer) -> None:
    """Kill a container, whatever the engine says (it may be gone, or the engine with it)."""
    with contextlib.suppress(*ENGINE_TROUBLE):
        await container.kill()


async def remove(container: DockerContainer) -> None:
    """Remove a container and its anonymous volumes, whatever the engine says."""
    with contextlib.suppress(*ENGINE_TROUBLE):
        await container.delete(force=True, v=True)
