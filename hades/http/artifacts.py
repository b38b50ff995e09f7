"""A job's kept files: ``GET /jobs/{id}/artifacts`` lists them from the job's history (every replica can answer),
``GET /jobs/{id}/artifacts/{path}`` streams one from the object store ``HADES_ARTIFACTS``.

A pipeline's are its stages', named ``<stage>/<path>``.

Retention removes objects on its own (``max_age`` in streams.yaml): the list marks a file whose object is gone as
``expired``, and its download answers 404 saying so.
"""

from __future__ import annotations

import mimetypes
import posixpath
from typing import Any
from urllib.parse import quote

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.response import Stream

from hades.adapters.nats.artifacts import ArtifactStore
from hades.core.artifacts import normal_path, object_name
from hades.core.events import ArtifactsStored
from hades.http.auth import basic_auth_guard
from hades.http.jobs import is_job_id, not_found
from hades.http.services import ApiServices
from hades.http.stage_views import pipeline_state
from hades.http.views import iso
from hades.http.wire.answers import GUARDED, JOB_NOT_FOUND, Error, json_answer
from hades.http.wire.pipelines import ArtifactList
from hades.workers.artifacts import kept_files


def _services(request: Request[Any, Any, State]) -> ApiServices:
    services: ApiServices = request.app.state.services
    return services


async def _kept(services: ApiServices, job_id: str) -> list[ArtifactsStored] | None:
    """The job's ``artifacts_stored`` events; None for an unknown job."""
    history = await services.store.history(job_id) if is_job_id(job_id) else []
    if not history:
        return None
    return [r.event for r in history if isinstance(r.event, ArtifactsStored)]


async def _sources(services: ApiServices, job_id: str) -> list[tuple[str, str]] | None:
    """Whose kept files the job's artifacts are, as (path prefix, job id): the job's own (""), or a pipeline's
    launched stages' (``<stage>/``); None for an unknown job."""
    pipeline = await pipeline_state(services, job_id)
    if pipeline is not None and pipeline.progress is not None:
        return [(f"{launch.name}/", launch.job_id) for launch in pipeline.progress.launched]
    return [("", job_id)]


@get(
    "/jobs/{job_id:str}/artifacts",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    responses={200: json_answer(ArtifactList, "The files the job kept"), 404: JOB_NOT_FOUND, **GUARDED},
)
async def list_artifacts(request: Request[Any, Any, State], job_id: FromPath[str]) -> Response[dict[str, Any]]:
    """Every file the job kept (path, size, sha256, stored_at, expired), and what it did not keep and why."""
    services = _services(request)
    sources = await _sources(services, job_id)
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for prefix, owner in sources or ():
        records = await _kept(services, owner)
        if records is None:
            if not prefix:
                return not_found(job_id)
            continue  # a stage launched a moment ago: its job is not there yet
        for path, (file, event) in kept_files(records).items():
            expired = await _expired(services.artifacts, object_name(owner, path))
            at = iso(event.at)
            rows.append(
                {"path": prefix + path, "size": file.size, "sha256": file.sha256, "stored_at": at, "expired": expired}
            )
        skipped += [{"path": prefix + s.path, "reason": s.reason} for s in (records[-1].skipped if records else ())]
    return Response(content={"job_id": job_id, "artifacts": rows, "skipped": skipped})


async def _expired(store: ArtifactStore | None, name: str) -> bool:
    return store is None or await store.info(name) is None


@get(
    "/jobs/{job_id:str}/artifacts/{path:path}",
    guards=[basic_auth_guard],
    security=[{"basic": []}],
    responses={
        200: json_answer(bytes, "The file's bytes, with its content type and a Content-Disposition"),
        404: json_answer(Error, "Unknown job, no such artifact, or expired by retention (the error says which)"),
        **GUARDED,
    },
)
async def download_artifact(request: Request[Any, Any, State], job_id: FromPath[str], path: FromPath[str]) -> Any:
    """The kept file, streamed from the object store; 404 naming why when it cannot be had."""
    services = _services(request)
    wanted = normal_path(path)
    sources = await _sources(services, job_id)
    owner, prefix = next(((o, p) for p, o in sources or () if wanted.startswith(p)), (job_id, ""))
    records = await _kept(services, owner)
    if records is None:
        return not_found(job_id) if not prefix else _gone(f"job {job_id} kept no artifact {wanted}")
    found = kept_files(records).get(wanted[len(prefix) :])
    if found is None:
        return _gone(f"job {job_id} kept no artifact {wanted}")
    chunks = await services.artifacts.read(object_name(owner, found[0].path)) if services.artifacts else None
    if chunks is None:
        return _gone(f"artifact {wanted} of job {job_id} has expired (HADES_ARTIFACTS retention)")
    name = posixpath.basename(wanted)
    headers = {
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
        "Content-Length": str(found[0].size),
        "X-Checksum-Sha256": found[0].sha256,
    }
    # As a header: litestar's Stream takes the handler's media type (JSON) over its own ``media_type``.
    headers["Content-Type"] = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return Stream(chunks, headers=headers)


def _gone(error: str) -> Response[dict[str, str]]:
    return Response(content={"error": error}, status_code=404)
