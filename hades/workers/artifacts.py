"""Artifacts at run time: inputs placed into the workspace before the first step, declared paths kept after the end.

Inputs: each ``"<job id>:<path>"`` is looked up in that job's history (its ``artifacts_stored`` events list what it
kept) and read from the object store; a job that has ended but not recorded its artifacts yet (they are kept after
its terminal event) is waited for, up to ``record_patience`` seconds. Each URL is fetched under the callback policy
(``CALLBACK_ALLOWED_HOSTS``, ``CALLBACK_DENY_PRIVATE``, checked on the name and again on every address connected to).
Everything is staged in a temporary directory, packed into one tar archive and handed to the executor. A missing,
expired or refused input fails the job before its first step, saying which.

Keeping: each declared path is read from the executor as a tar stream and spooled to a temporary file, read no
further than what ``ARTIFACT_MAX_BYTES`` still allows; each regular file in it becomes one object
``<job id>/<path>``. What does not fit, links, and paths that are not there are listed as skipped, with why.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import posixpath
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from nats.errors import Error as NatsError

from hades.adapters.http_delivery import TargetRefused, guarded_transport
from hades.adapters.nats.artifacts import ArtifactStore
from hades.core.artifacts import (
    Input,
    SkippedArtifact,
    StoredArtifact,
    normal_path,
    not_kept_reason,
    object_name,
    placed_at,
)
from hades.core.commands import RecordArtifacts
from hades.core.events import ArtifactsStored, Event, JobSubmitted
from hades.core.lifecycle import fold
from hades.core.ports import AttemptLost, EventStore, ExecutionError, WorkspaceFiles
from hades.core.stages import stage_job_id
from hades.core.state import JobState, StepStatus
from hades.core.urls import CallbackPolicy, callback_host

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 256 * 2**20
#: Read this much of a declared path's tar stream beyond the bytes left, for the headers around the files.
TAR_SLACK = 2**20
_MAX_REDIRECTS = 5
#: Seconds an input waits for an ended job's ``artifacts_stored`` (its executor uploads the files after the end).
RECORD_PATIENCE = 60.0
_RECORD_POLL = 0.2


class _Budget:
    """Bytes still allowed for one job."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def over(self, size: int) -> str:
        return f"over ARTIFACT_MAX_BYTES ({self.limit} bytes a job): {size} bytes with {self.left} left"


def kept_files(history: list[ArtifactsStored]) -> dict[str, tuple[StoredArtifact, ArtifactsStored]]:
    """Every file a job kept, by path (a later attempt's record of a path wins), with the event that recorded it."""
    files: dict[str, tuple[StoredArtifact, ArtifactsStored]] = {}
    for event in history:
        for file in event.files:
            files[file.path] = (file, event)
    return files


def _record_due(history: list[Event]) -> bool:
    """Whether the job has ended with artifacts declared and a step run, so its executor is about to record them."""
    state = fold(history)
    return state is not None and state.status.is_terminal and bool(state.spec.artifacts) and ran_steps(state)


def ran_steps(state: JobState) -> bool:
    """Whether the attempt got as far as a step (so its workspace may hold something to keep)."""
    return any(step.status is not StepStatus.PENDING for step in state.steps)


class Artifacts:
    """Inputs in, artifacts out, for the attempt runner."""

    def __init__(
        self,
        store: ArtifactStore,
        events: EventStore,
        policy: CallbackPolicy | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        fetch_timeout: float = 60.0,
        record_patience: float = RECORD_PATIENCE,
    ) -> None:
        self._store = store
        self._record_patience = record_patience
        self._events = events
        self._policy = policy or CallbackPolicy()
        self._max_bytes = max_bytes
        self._fetch_timeout = fetch_timeout

    # -- inputs -----------------------------------------------------------------------------------------------

    async def place_inputs(self, job: JobState, files: WorkspaceFiles) -> None:
        """Fetch every input, then unpack them into the workspace together; raises ExecutionError naming the
        input that could not be had (AttemptLost when NATS could not be read: the attempt is handed back)."""
        budget = _Budget(self._max_bytes)
        with tempfile.TemporaryDirectory(prefix="hades-inputs-") as scratch:
            stage = Path(scratch) / "stage"
            stage.mkdir()
            for item in job.spec.inputs:
                try:
                    if item.is_url:
                        await self._fetch(item, stage, budget)
                    else:
                        await self._copy(item, stage, budget)
                except NatsError as error:  # NATS away (a restart): no fault of the job's, so another attempt
                    raise AttemptLost(f"input {item.source}: the artifact store cannot be read: {error!r}") from error
                except OSError as error:
                    raise ExecutionError(f"input {item.source}: cannot place it at {item.target}: {error}") from error
            archive = Path(scratch) / "inputs.tar"
            await asyncio.to_thread(_pack, stage, archive)
            await files.write_inputs(job, archive)

    async def _copy(self, item: Input, stage: Path, budget: _Budget) -> None:
        item = await self._through_pipeline(item)
        history, records = await self._records(item.job_id)
        if not records:
            if not history:
                what = "is unknown"
            elif _record_due(history):
                waited = f"{self._record_patience:g} s"
                what = f"ended but recorded no artifacts within {waited}: its executor stopped before keeping them"
            else:
                what = "has kept no artifacts (yet)"
            raise ExecutionError(f"input {item.source}: job {item.job_id} {what}")
        wanted = [(file, placed_at(path, item)) for path, (file, _) in kept_files(records).items()]
        found = [(file, target) for file, target in wanted if target is not None]
        if not found:
            raise ExecutionError(f"input {item.source}: job {item.job_id} kept no artifact at {item.path}")
        for file, target in found:
            if file.size > budget.left:
                raise ExecutionError(f"input {item.source}: {file.path} is {budget.over(file.size)}")
            chunks = await self._store.read(object_name(item.job_id, file.path))
            if chunks is None:
                raise ExecutionError(
                    f"input {item.source}: {file.path} of job {item.job_id} has expired (HADES_ARTIFACTS retention)"
                )
            await _write_capped(chunks, stage / target, budget, item)

    async def _through_pipeline(self, item: Input) -> Input:
        """``"<pipeline id>:<stage>/<path>"`` reads the stage's own artifact ``<path>`` (landing where the input
        says, by default at ``<stage>/<path>``); any other input is left as it is."""
        first = await self._events.submitted(item.job_id)
        if first is None or not isinstance(first.event, JobSubmitted) or not first.event.spec.is_pipeline:
            return item
        name, _, path = item.path.partition("/")
        return Input(source=f"{stage_job_id(item.job_id, name)}:{path or '.'}", destination=item.target)

    async def _records(self, job_id: str) -> tuple[list[Event], list[ArtifactsStored]]:
        """The job's history and its ``artifacts_stored`` events, once the record its end makes due has landed or
        ``record_patience`` has passed."""
        deadline = time.monotonic() + self._record_patience
        while True:
            history = [r.event for r in await self._events.history(job_id)]
            records = [event for event in history if isinstance(event, ArtifactsStored)]
            if records or not _record_due(history) or time.monotonic() >= deadline:
                return history, records
            await asyncio.sleep(_RECORD_POLL)

    async def _fetch(self, item: Input, stage: Path, budget: _Budget) -> None:
        refused = self._policy.host_refusal(callback_host(item.source)) if self._policy.restricts else None
        if refused is not None:
            raise ExecutionError(f"input {item.source}: {_as_input(refused)}")
        transport = guarded_transport(self._policy) if self._policy.restricts else None
        async with httpx.AsyncClient(
            timeout=self._fetch_timeout,
            follow_redirects=True,
            max_redirects=_MAX_REDIRECTS,
            transport=transport,
            trust_env=transport is None,
        ) as client:
            try:
                async with asyncio.timeout(self._fetch_timeout), client.stream("GET", item.source) as response:
                    if response.status_code != 200:
                        raise ExecutionError(f"input {item.source}: the server answered HTTP {response.status_code}")
                    await _write_capped(response.aiter_bytes(), stage / item.target, budget, item)
            except TargetRefused as error:
                raise ExecutionError(f"input {item.source}: not fetched: {_as_input(str(error))}") from error
            except TimeoutError as error:
                raise ExecutionError(f"input {item.source}: not fetched within {self._fetch_timeout:g} s") from error
            except httpx.HTTPError as error:
                raise ExecutionError(f"input {item.source}: {type(error).__name__}: {error}") from error

    # -- keeping ----------------------------------------------------------------------------------------------

    async def collect(self, job: JobState, files: WorkspaceFiles) -> RecordArtifacts | None:
        """Keep the ended attempt's declared paths; None when there is nothing to record (none declared, or the
        attempt never got to a step)."""
        spec = job.spec
        if not spec.artifacts or not job.status.is_terminal or not ran_steps(job):
            return None
        reason = not_kept_reason(spec.artifacts_when.value, job.status.value)
        if reason is not None:
            return RecordArtifacts(
                job.attempt, skipped=tuple(SkippedArtifact(path=p, reason=reason) for p in spec.artifacts)
            )
        budget = _Budget(self._max_bytes)
        stored: dict[str, StoredArtifact] = {}
        skipped: list[SkippedArtifact] = []
        with tempfile.TemporaryDirectory(prefix="hades-artifacts-") as scratch:
            spool = Path(scratch) / "spool.tar"
            for declared in dict.fromkeys(normal_path(path) for path in spec.artifacts):
                await self._keep(job, files, declared, spool, budget, stored, skipped)
        return RecordArtifacts(job.attempt, tuple(stored.values()), tuple(skipped))

    async def _keep(
        self,
        job: JobState,
        files: WorkspaceFiles,
        declared: str,
        spool: Path,
        budget: _Budget,
        stored: dict[str, StoredArtifact],
        skipped: list[SkippedArtifact],
    ) -> None:
        try:
            cut = await _spool(files.read_path(job, declared), spool, budget.left + TAR_SLACK)
        except FileNotFoundError:
            skipped.append(SkippedArtifact(path=declared, reason="not found in the workspace"))
            return
        except Exception as error:  # the engine could not read it: say so in the list, keep the rest
            log.warning("job %s: could not read artifact path %s: %s", job.job_id, declared, error)
            skipped.append(SkippedArtifact(path=declared, reason=f"could not be read: {type(error).__name__}: {error}"))
            return
        members, size = await asyncio.to_thread(_members, spool), await asyncio.to_thread(_size, spool)
        base = posixpath.dirname(declared)
        with spool.open("rb") as raw:
            for member in members:
                path = normal_path(posixpath.join(base, member.name))
                if member.isdir() or path in stored:
                    continue
                if not member.isfile():
                    skipped.append(SkippedArtifact(path=path, reason="not a regular file (links are not kept)"))
                elif member.offset_data + member.size > size or member.size > budget.left:
                    skipped.append(SkippedArtifact(path=path, reason=budget.over(member.size)))
                else:
                    try:
                        stored[path] = await self._put(job.job_id, path, raw, member)
                    except Exception as error:  # the store refused it (full, unreachable): the rest may still fit
                        skipped.append(SkippedArtifact(path=path, reason=f"the artifact store refused it: {error!r}"))
                        continue
                    budget.left -= member.size
        if cut:
            reason = f"cut at ARTIFACT_MAX_BYTES ({budget.limit} bytes a job): later files under it were not read"
            skipped.append(SkippedArtifact(path=declared, reason=reason))

    async def _put(self, job_id: str, path: str, raw: io.BufferedReader, member: tarfile.TarInfo) -> StoredArtifact:
        raw.seek(member.offset_data)
        facts = await self._store.put(object_name(job_id, path), io.BufferedReader(_Window(raw, member.size)))
        return StoredArtifact(path=path, size=facts.size, sha256=facts.sha256)


# -- files ------------------------------------------------------------------------------------------------------


class _Window(io.RawIOBase):
    """The next ``size`` bytes of a file, as a file of their own."""

    def __init__(self, raw: io.BufferedReader, size: int) -> None:
        self._raw = raw
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)[: self._left]
        n = self._raw.readinto(view)
        self._left -= n
        return n


async def _spool(chunks: AsyncIterator[bytes], spool: Path, limit: int) -> bool:
    """Write the stream to ``spool`` up to ``limit`` bytes; True when it was cut there."""
    written = 0
    try:
        with spool.open("wb") as out:
            async for chunk in chunks:
                out.write(chunk[: limit - written])
                written += len(chunk)
                if written > limit:
                    return True
        return False
    finally:
        with contextlib.suppress(Exception):
            await chunks.aclose()  # type: ignore[attr-defined]


def _members(spool: Path) -> list[tarfile.TarInfo]:
    """The members whose headers are in the spool (a spool cut short ends early)."""
    found: list[tarfile.TarInfo] = []
    with contextlib.suppress(tarfile.TarError), tarfile.open(spool) as tar:
        found.extend(tar)
    return found


def _size(path: Path) -> int:
    return path.stat().st_size


async def _write_capped(chunks: AsyncIterator[bytes], target: Path, budget: _Budget, item: Input) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        async for chunk in chunks:
            if len(chunk) > budget.left:
                raise ExecutionError(f"input {item.source}: inputs are {budget.over(len(chunk))}")
            out.write(chunk)
            budget.left -= len(chunk)


def _pack(stage: Path, archive: Path) -> None:
    """The staged inputs as one tar archive, owned by root and readable by anyone."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode |= 0o755 if info.isdir() else 0o644
        return info

    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for child in sorted(stage.iterdir()):
            tar.add(child, arcname=child.name, filter=owned)


def _as_input(reason: str) -> str:
    return reason.replace("callback URL", "input URL")
