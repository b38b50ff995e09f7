"""Reading a job request as the Go Hades does: ``parse_job_request`` (``POST /build``) and ``parse_stages_request``.

The body is decoded as Go's encoding/json decodes into the Go structs (strict types, int64 ranges, case-insensitive
field names, ``null`` leaves a field as it was, unknown fields ignored); the decoded job is then checked by
``hades.core.spec.validate_job_spec``, in the Go order. Every failure is a SpecError whose message is the
plain-text 400 body. Where Go answers a bare ``Invalid JSON body``, ours starts with it (clients match on it) and
goes on to say what and where (``Invalid JSON body: steps[0].id: expected an integer, not a string``). Unknown keys
are ignored as in Go, except one that is a likely typo of a field at its level (``stpes``), which is refused.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from hades.core.artifacts import decode_artifacts, decode_inputs, decode_when
from hades.core.errors import SpecError
from hades.core.go_json import JSONObject, go_time, go_uuid, json_kind
from hades.core.spec import INVALID_JSON_BODY, JobSpec, validate_job_spec
from hades.core.stages import Stage
from hades.core.steps import Step

__all__ = ["parse_job_request", "parse_stages_request"]


# -- decoding, as encoding/json decodes into the Go structs --------------------------------------------------


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Go matches field names case-insensitively: ASCII letters, plus the four runes that fold onto ASCII ones.
_FOLD = str.maketrans(
    {chr(c): chr(c - 32) for c in range(ord("a"), ord("z") + 1)}
    | {"\u017f": "S", "\u212a": "K", "\u0130": "I", "\u0131": "I"}
)
_FOLDED_FIELDS = {
    model: {name.translate(_FOLD): name for name in model.model_fields} for model in (JobSpec, Step, Stage)
}
_Model = type[JobSpec] | type[Step] | type[Stage]
#: What a misspelt key is compared with: every name the model reads (field names and any aliases), folded.
_KNOWN_NAMES = {
    model: sorted(
        {
            name.translate(_FOLD)
            for field_name, field in model.model_fields.items()
            for name in (field_name, field.alias, field.validation_alias)
            if isinstance(name, str)
        }
    )
    for model in (JobSpec, Step, Stage)
}
#: How alike a key and a field name must be (difflib's ratio) for the key to be taken as a typo of it: 0.75 takes
#: two letters swapped in a four-letter name (``nmae``).
_TYPO_CUTOFF = 0.75


def _bind_error(where: str, what: str) -> SpecError:
    """Go's ``Invalid JSON body``, then what is wrong and where (a path such as ``steps[0].id``; "" for the body)."""
    return SpecError(f"{INVALID_JSON_BODY}: {where}: {what}" if where else f"{INVALID_JSON_BODY}: {what}")


def _validation_error(error: ValidationError, prefix: str) -> SpecError:
    """pydantic's first complaint about a field, said in the request's terms: the path, what was expected."""
    first = error.errors(include_url=False)[0]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
    return _bind_error((prefix.rstrip(".") + path).lstrip("."), _expected(first))


_EXPECTED = {
    "int_type": "expected an integer",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "dict_type": "expected an object",
    "tuple_type": "expected an array",
    "model_type": "expected an object",
}


def _expected(error: Mapping[str, Any]) -> str:
    """What a field needed, from one of pydantic's error details (its ``type``, ``ctx``, ``input``, ``msg``)."""
    kind, value, msg = error["type"], error["input"], str(error["msg"])
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, not {json_kind(value)}"
    if kind == "greater_than_equal":
        return f"must be at least {error['ctx']['ge']}, not {value}"
    if kind == "less_than_equal":
        return f"must be at most {error['ctx']['le']}, not {value}"
    return msg[:1].lower() + msg[1:]


def _go_text(s: str) -> str:
    """Go decodes an unpaired surrogate escape to U+FFFD; Python keeps it, and nothing can encode it later."""
    return _LONE_SURROGATE.sub("\ufffd", s)


def _json_object(pairs: list[tuple[str, Any]]) -> JSONObject:
    return JSONObject([(_go_text(key), _go_text(v) if isinstance(v, str) else v) for key, v in pairs])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load_json(body: bytes) -> Any:
    if body.startswith(b"\xef\xbb\xbf"):
        raise _bind_error("", "the body starts with a UTF-8 byte order mark; send the JSON without it")
    if not body.strip():
        raise _bind_error("", "the body is empty")
    try:
        text = body.decode("utf-8")
        return json.loads(text, object_pairs_hook=_json_object, parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise _bind_error("", f"the body is not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise _bind_error("", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except ValueError as exc:  # NaN, Infinity
        raise _bind_error("", f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise _bind_error("", "nested too deeply") from exc


def _field_name(model: _Model, key: str) -> str | None:
    """The field a JSON key sets: an exact match first, else a case-insensitive one, as in Go."""
    if key in model.model_fields:
        return key
    return _FOLDED_FIELDS[model].get(key.translate(_FOLD))


def _refuse_typo(model: _Model, key: str, where: str) -> None:
    """Refuse an unknown key that looks like a misspelt field name (``stpes``); any other is ignored, as in Go,
    since clients may send fields of their own. A typo (a letter swapped, missed, doubled or wrong) changes the
    length by one at most: a word alike but shorter or longer (``tags`` and ``stages``) is a field of its own."""
    folded = key.translate(_FOLD)
    alike = [name for name in _KNOWN_NAMES[model] if abs(len(name) - len(folded)) <= 1]
    close = difflib.get_close_matches(folded, alike, n=1, cutoff=_TYPO_CUTOFF)
    if close:
        meant = _FOLDED_FIELDS[model].get(close[0], close[0].lower())
        raise SpecError(f'unknown field "{where}{key}" (did you mean "{meant}"?)')


def _decode_struct(model: _Model, value: Any, into: dict[str, Any], where: str = "") -> dict[str, Any]:
    """Decode a JSON object into (a copy of) ``into``; like Go, a repeated key decodes again on top. ``where`` is
    the object's path in the body, ending in a dot (``steps[0].``), for the errors."""
    if not isinstance(value, JSONObject):
        raise _bind_error(where.rstrip("."), f"expected an object, not {json_kind(value)}")
    decoded = dict(into)
    for key, member in value.members:
        name = _field_name(model, key)
        if name is None:
            _refuse_typo(model, key, where)
        elif member is not None:  # null leaves the field as it was
            decoded[name] = _decode_field(model, name, member, decoded.get(name), where)
    return decoded


def _decode_field(model: _Model, name: str, value: Any, current: Any, where: str) -> Any:
    if name == "metadata":
        return _decode_metadata(value, current or {}, f"{where}metadata")
    if name == "steps":
        return _decode_steps(value, current or [], f"{where}steps")
    if name == "constraints":
        return _decode_constraints(value)
    if name == "resources":
        return _decode_resources(value)
    if name == "stages" and model is JobSpec:
        return _decode_stages(value)
    if name == "needs" and model is Stage:
        return _decode_needs(value)
    if name in _ARTIFACT_DECODERS:
        return _ARTIFACT_DECODERS[name](value)
    read = _GO_READERS.get(name) if model is JobSpec else None
    try:  # a scalar: Go's reading of ids and times, then the model's own field definition
        return getattr(model.model_validate({name: read(value) if read else value}), name)
    except ValidationError as exc:
        raise _validation_error(exc, where) from exc
    except ValueError as exc:  # Go's reading of an id or a time
        raise _bind_error(f"{where}{name}", str(exc)) from exc


_GO_READERS: dict[str, Callable[[object], object]] = {"id": go_uuid, "timestamp": go_time}


def _decode_metadata(value: Any, current: dict[str, str], where: str) -> dict[str, str]:
    if not isinstance(value, JSONObject):
        raise _bind_error(where, f"expected an object of strings, not {json_kind(value)}")
    merged = dict(current)  # Go decodes into the map it already has
    for key, item in value.members:
        if item is not None and not isinstance(item, str):
            raise _bind_error(f"{where}[{json.dumps(key)}]", f"expected a string, not {json_kind(item)}")
        merged[key] = item or ""  # Go stores "" for a null map value
    return merged


def _decode_steps(value: Any, current: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _bind_error(where, f"expected an array of steps, not {json_kind(value)}")
    steps = []
    for index, item in enumerate(value):  # Go decodes element i on top of the existing element i
        existing = current[index] if index < len(current) else {}
        steps.append(existing if item is None else _decode_struct(Step, item, existing, f"{where}[{index}]."))
    return steps


# Ours, not Go's: decoding errors of these name the problem instead of "Invalid JSON body". Nomad's JSON API
# names (LTarget, Operand, RTarget) are read too.
_CONSTRAINT_KEYS = {
    "attribute": "attribute",
    "ltarget": "attribute",
    "operator": "operator",
    "operand": "operator",
    "value": "value",
    "rtarget": "value",
}
_CONSTRAINTS_SHAPE = 'must be a list of objects such as {"attribute": "os", "operator": "=", "value": "linux"}'


def _decode_constraints(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not all(isinstance(item, JSONObject) for item in value):
        raise SpecError(f"Invalid constraints: {_CONSTRAINTS_SHAPE}")
    constraints = []
    for index, item in enumerate(value):
        fields: dict[str, str] = {}
        for key, member in item.members:
            name = _CONSTRAINT_KEYS.get(key.lower())
            if name is None or member is None:
                continue
            if not isinstance(member, str):
                raise SpecError(f"Invalid constraints[{index}]: {key} must be a string")
            fields[name] = member
        constraints.append(fields)
    return constraints


def _decode_resources(value: Any) -> dict[str, Any]:
    if not isinstance(value, JSONObject):
        raise SpecError('Invalid resources: must be an object such as {"cpu": 2, "memory": "4g"}')
    fields: dict[str, Any] = {}
    for key, member in value.members:
        name = key.lower()
        if name == "cpu" and member is not None:
            number = isinstance(member, int | float) and not isinstance(member, bool)
            if not number or not math.isfinite(member):
                raise SpecError("Invalid resources: cpu must be a number of cores")
            fields["cpu"] = member
        elif name == "memory" and member is not None:
            if not isinstance(member, str):
                raise SpecError('Invalid resources: memory must be a size string such as "512m" or "2g"')
            fields["memory"] = member
    return fields


_STAGES_SHAPE = 'must be a list of objects such as {"name": "build", "steps": [...], "needs": []}'


def _decode_stages(value: Any) -> list[dict[str, Any]]:
    """``stages`` (ours): a list of objects, each decoded as the job's own fields are, plus ``name`` and ``needs``."""
    if not isinstance(value, list) or not all(isinstance(item, JSONObject) for item in value):
        raise SpecError(f"Invalid stages: {_STAGES_SHAPE}")
    return [_decode_struct(Stage, item, {}, f"stages[{index}].") for index, item in enumerate(value)]


def _decode_needs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError('Invalid needs: must be a list of stage names, such as ["build"]')
    return list(value)


_ARTIFACT_DECODERS: dict[str, Callable[[Any], Any]] = {
    "artifacts": decode_artifacts,
    "artifacts_when": decode_when,
    "inputs": lambda value: decode_inputs(value, lambda item: item.members if isinstance(item, JSONObject) else None),
}


def _decode_job(body: bytes) -> JobSpec:
    raw = _load_json(body)
    top = JSONObject([]) if raw is None else raw  # Go: a top-level null decodes to the zero struct
    fields = _decode_struct(JobSpec, top, {})
    try:
        return JobSpec.model_validate(fields)
    except ValidationError as exc:
        raise _validation_error(exc, "") from exc


def parse_stages_request(body: bytes) -> tuple[tuple[Stage, ...], str | None]:
    """Decode a ``POST /jobs/{id}/stages`` body: ``{"stages": [...], "stage": "<the adding stage>"}``; the stages
    decode as a pipeline's do. Raises SpecError naming the problem (the checks against the pipeline come later)."""
    raw = _load_json(body)
    if not isinstance(raw, JSONObject):
        raise SpecError(f'Invalid body: must be an object such as {{"stages": [...]}}; stages {_STAGES_SHAPE}')
    members = {key.lower(): value for key, value in raw.members}
    by = members.get("stage")
    if by is not None and not isinstance(by, str):
        raise SpecError("Invalid stage: must be the adding stage's name (its HADES_STAGE)")
    decoded = _decode_stages(members.get("stages"))
    if not decoded:
        raise SpecError("Invalid stages: name at least one stage to add")
    return tuple(_stage(fields, index) for index, fields in enumerate(decoded)), by


def _stage(fields: dict[str, Any], index: int) -> Stage:
    try:
        return Stage.model_validate(fields)
    except ValidationError as error:
        raise _validation_error(error, f"stages[{index}]") from error


# -- the entry point ---------------------------------------------------------------------------------------


def parse_job_request(body: bytes) -> JobSpec:
    """Decode and validate a ``POST /build`` body.

    Raises SpecError whose message is the plain-text 400 body: ``Invalid JSON body: <where>: <what>`` for
    anything that does not decode (empty, not UTF-8, not JSON, wrong types, out-of-range integers), an unknown
    field that looks like a typo, otherwise the first problem ``validate_job_spec`` finds (Go's message).
    """
    spec = _decode_job(body)
    problem = validate_job_spec(spec)
    if problem is not None:
        raise SpecError(problem)
    return spec
