"""Artifacts: the files a job keeps after it ends, and the inputs placed into its workspace before its first step.

A job declares ``artifacts``, paths relative to its workspace (``/shared`` on Docker, ``HADES_SHARED`` on the process
executor), each a file or a directory (kept recursively), kept ``artifacts_when`` the job ended ``always`` (the
default), ``on_success`` or ``on_failure`` (as GitLab's ``when``). It declares ``inputs``, each ``"<job id>:<path>"``
(an artifact of an earlier job: a file, or a directory prefix) or an http(s) URL to fetch (as Nomad's ``artifact``
block), in either form optionally as ``{"source": ..., "destination": ...}``.

Pure: the models, the checks (each problem a 400 body naming the field), and the path arithmetic the executors use.
"""

from __future__ import annotations

import posixpath
import uuid
from enum import StrEnum
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, StrictStr

from hades.core.errors import SpecError
from hades.core.urls import validate_callback_url

__all__ = [
    "MAX_ARTIFACT_PATHS",
    "MAX_INPUTS",
    "ArtifactsWhen",
    "Input",
    "SkippedArtifact",
    "StoredArtifact",
    "artifacts_problem",
    "decode_artifacts",
    "decode_inputs",
    "decode_when",
    "not_kept_reason",
    "object_name",
    "placed_at",
]

MAX_ARTIFACT_PATHS = 64
MAX_INPUTS = 32
MAX_PATH_CHARS = 1024
_ARTIFACTS_SHAPE = 'must be a list of paths relative to the workspace, such as ["dist", "reports/junit.xml"]'
_INPUTS_SHAPE = (
    'must be a list of "<job id>:<path>" or http(s) URLs, or objects such as '
    '{"source": "https://example.com/tool.tar.gz", "destination": "tools/tool.tar.gz"}'
)


class ArtifactsWhen(StrEnum):
    """When a job's artifacts are kept, by how it ended (GitLab's ``artifacts:when``)."""

    ALWAYS = "always"
    ON_SUCCESS = "on_success"
    ON_FAILURE = "on_failure"


class Input(BaseModel):
    """One input: ``source`` is ``"<job id>:<path>"`` or an http(s) URL; ``destination`` is where it lands in the
    workspace (default: the artifact's own path, or the URL's last path segment)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source: StrictStr
    destination: StrictStr = ""

    @property
    def is_url(self) -> bool:
        """A URL to fetch, rather than an artifact of an earlier job."""
        return "://" in self.source

    @property
    def job_id(self) -> str:
        """The earlier job whose artifact this is ("" for a URL)."""
        return "" if self.is_url else self.source.partition(":")[0]

    @property
    def path(self) -> str:
        """The earlier job's artifact path, normalised ("" for a URL)."""
        return "" if self.is_url else normal_path(self.source.partition(":")[2])

    @property
    def target(self) -> str:
        """Where the input lands in the workspace, normalised."""
        if self.destination:
            return normal_path(self.destination)
        if self.is_url:
            return normal_path(unquote(posixpath.basename(urlsplit(self.source).path))) or "download"
        return self.path


class StoredArtifact(BaseModel):
    """One file kept in the object store: its path in the workspace, size and SHA-256 (hex)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str
    size: int
    sha256: str


class SkippedArtifact(BaseModel):
    """A declared path (or a file under it) that was not kept, and why."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str
    reason: str


# -- decoding (the shapes), then the checks -----------------------------------------------------------------------


def decode_artifacts(value: Any) -> list[str]:
    """``artifacts`` as decoded JSON: a list of strings, else a 400 naming the shape."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"Invalid artifacts: {_ARTIFACTS_SHAPE}")
    return list(value)


def decode_when(value: Any) -> str:
    """``artifacts_when``: one of always, on_success, on_failure."""
    choices = ", ".join(when.value for when in ArtifactsWhen)
    if not isinstance(value, str) or value not in {when.value for when in ArtifactsWhen}:
        raise SpecError(f"Invalid artifacts_when: {value!r}; use one of {choices}")
    return value


def decode_inputs(value: Any, members: Any) -> list[dict[str, str]]:
    """``inputs``: strings or ``{"source", "destination"}`` objects; ``members`` reads a decoded JSON object's
    (key, value) pairs (the spec decoder's own object type stays there)."""
    if not isinstance(value, list):
        raise SpecError(f"Invalid inputs: {_INPUTS_SHAPE}")
    inputs = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            inputs.append({"source": item})
            continue
        pairs = members(item)
        if pairs is None:
            raise SpecError(f"Invalid inputs[{index}]: {_INPUTS_SHAPE}")
        fields = {key.lower(): member for key, member in pairs if member is not None}
        picked = {name: fields[name] for name in ("source", "destination") if name in fields}
        if not isinstance(picked.get("source"), str) or not isinstance(picked.get("destination", ""), str):
            raise SpecError(f"Invalid inputs[{index}]: source (and destination, if given) must be strings")
        inputs.append(picked)
    return inputs


def artifacts_problem(artifacts: tuple[str, ...], inputs: tuple[Input, ...]) -> str | None:
    """The first problem with a job's artifact paths and inputs (a 400 body), or None."""
    if len(artifacts) > MAX_ARTIFACT_PATHS:
        return f"Invalid artifacts: at most {MAX_ARTIFACT_PATHS} paths, not {len(artifacts)}"
    for index, path in enumerate(artifacts):
        problem = path_problem(path)
        if problem is not None:
            return f"Invalid artifacts[{index}]: {problem}"
    if len(inputs) > MAX_INPUTS:
        return f"Invalid inputs: at most {MAX_INPUTS} inputs, not {len(inputs)}"
    for index, item in enumerate(inputs):
        problem = _input_problem(item)
        if problem is not None:
            return f"Invalid inputs[{index}]: {problem}"
    return None


def _input_problem(item: Input) -> str | None:
    if item.is_url:
        scheme = item.source.partition("://")[0]
        if scheme.lower() not in ("http", "https"):
            return f"URL scheme {scheme!r} is not supported; use http or https"
        reason = validate_callback_url(item.source)
        if reason is not None:
            return reason.replace("callback URL", "input URL")
    else:
        job_id, colon, path = item.source.partition(":")
        if not colon or not _is_job_id(job_id):
            return f'{item.source!r} names no job: use "<job id>:<path>" (the job id a UUID) or an http(s) URL'
        problem = path_problem(path)
        if problem is not None:
            return problem
    if item.destination:
        problem = path_problem(item.destination)
        return None if problem is None else f"destination {problem}"
    return None


def _is_job_id(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name something inside the workspace, or None."""
    if not path or not normal_path(path):
        return f"{path!r} names no file or directory inside the workspace"
    if len(path) > MAX_PATH_CHARS:
        return f"a path is at most {MAX_PATH_CHARS} characters, not {len(path)}"
    if any(ord(char) < 32 or char == "\x7f" for char in path):
        return f"{path!r} has a control character"
    if path.startswith("/"):
        return f"{path!r} is absolute; paths are relative to the workspace (/shared)"
    if ".." in path.split("/"):
        return f"{path!r} leaves the workspace ('..')"
    return None


def normal_path(path: str) -> str:
    """``path`` without empty and ``.`` segments (``./dist//a`` is ``dist/a``); "" for the workspace itself."""
    return "/".join(part for part in path.split("/") if part not in ("", "."))


# -- at run time ----------------------------------------------------------------------------------------------------


def object_name(job_id: str, path: str) -> str:
    """The object store's name of one kept file: ``<job id>/<path>``."""
    return f"{job_id}/{path}"


def placed_at(artifact: str, item: Input) -> str | None:
    """Where an earlier job's artifact file lands for this input, or None when the input does not name it (the
    input's path is the file itself or a directory above it)."""
    source = item.path
    if artifact == source:
        return item.target
    if artifact.startswith(f"{source}/"):
        return f"{item.target}{artifact[len(source) :]}"
    return None


def not_kept_reason(when: str, status: str) -> str | None:
    """Why ``artifacts_when`` keeps nothing of a job that ended in ``status`` (``Succeeded``, ``Failed``,
    ``Stopped``), or None when it keeps them; a stopped job's are kept only ``always``."""
    keeps = {
        ArtifactsWhen.ALWAYS.value: True,
        ArtifactsWhen.ON_SUCCESS.value: status == "Succeeded",
        ArtifactsWhen.ON_FAILURE.value: status == "Failed",
    }
    return None if keeps.get(when, True) else f"not kept: artifacts_when is {when} and the job ended {status}"
