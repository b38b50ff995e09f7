"""Where a job may run: its Nomad-shaped ``constraints`` and ``resources`` against an executor's labels.

An executor advertises labels (``os=linux,arch=amd64,pool=gpu``, plus ``cpu`` cores and ``memory`` it detected).
A job asks for some of them: each constraint names a label (``attribute``, Nomad's ``${attr.os}`` form also read),
an ``operator`` and a ``value``:

- ``=`` (the default): the label is there and equals the value;
- ``!=``: the label is absent or differs (as in Nomad);
- ``regexp``: the label is there and the pattern (Python's ``re``) matches somewhere in it;
- ``set_contains``: every item of the comma list ``value`` is in the label's comma list.

``resources`` ask for ``cpu`` cores and ``memory`` (a size such as ``2g``): the executor's ``cpu`` and ``memory``
labels must be at least that much (an executor that advertises no such label cannot take the job), and, while the
job's attempt runs, that much is reserved: ``fits`` takes it off what the executor has left for further jobs.

A job's requirements, normalised, are its :class:`Placement`; equal placements share one pool (:attr:`Placement.key`,
a short stable hash), which is what the queues are keyed on.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from hades.core.memory import MemoryFormatError, parse_memory

__all__ = [
    "MAX_CONSTRAINTS",
    "OPERATORS",
    "Constraint",
    "LabelError",
    "Placement",
    "Resources",
    "constraints_problem",
    "fits",
    "parse_labels",
    "placement_of",
    "resources_problem",
    "satisfies",
]

#: The operators a constraint may use (``==`` is read as ``=``).
OPERATORS = ("=", "!=", "regexp", "set_contains")
MAX_CONSTRAINTS = 32
MAX_PATTERN_CHARS = 256
_ALIASES = {"==": "="}
_LABEL_KEY = re.compile(r"[A-Za-z0-9_.-]+")
_INTERPOLATED = re.compile(r"\$\{(?:attr|meta|node)\.([^}]*)\}")
#: Nomad's attribute names for what every executor detects.
_NOMAD_NAMES = {"kernel.name": "os", "cpu.arch": "arch"}


class LabelError(ValueError):
    """``HADES_EXECUTOR_LABELS`` does not parse; the message says where."""


class Constraint(BaseModel):
    """One requirement on an executor label, as submitted."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    attribute: StrictStr = ""
    operator: StrictStr = "="
    value: StrictStr = ""


class Resources(BaseModel):
    """What a job needs of the machine it runs on: ``cpu`` cores and ``memory`` (``512m``, ``2g``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    cpu: StrictFloat | StrictInt = 0
    memory: StrictStr = ""


class Placement(BaseModel):
    """A job's requirements in one normal form: equal requirements give equal placements and one pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    constraints: tuple[Constraint, ...] = ()
    cpu: float = Field(default=0, ge=0)
    memory: int = Field(default=0, ge=0)

    @functools.cached_property
    def key(self) -> str:
        """The pool token: 12 hex digits of the hash of the normal form (a subject token and a consumer suffix)."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]

    def describe(self) -> str:
        """The requirements in a few words: ``os=windows, pool=gpu, cpu>=4``."""
        words = [_describe(c) for c in self.constraints]
        if self.cpu:
            words.append(f"cpu>={self.cpu:g}")
        if self.memory:
            words.append(f"memory>={_size(self.memory)}")
        return ", ".join(words)


def attribute_name(attribute: str) -> str:
    """The label key an attribute names: ``${attr.os}`` is ``os``; Nomad's ``kernel.name`` and ``cpu.arch`` are
    ``os`` and ``arch``."""
    match = _INTERPOLATED.fullmatch(attribute.strip())
    name = match[1] if match else attribute.strip()
    return _NOMAD_NAMES.get(name, name)


def _normal(constraint: Constraint) -> Constraint:
    operator = _ALIASES.get(constraint.operator, constraint.operator)
    value = constraint.value
    if operator == "set_contains":
        value = ",".join(sorted(_items(value)))
    return Constraint(attribute=attribute_name(constraint.attribute), operator=operator, value=value)


def placement_of(constraints: tuple[Constraint, ...], resources: Resources | None) -> Placement | None:
    """The normal form of valid requirements; None when the job may run anywhere."""
    normal = tuple(sorted({_normal(c) for c in constraints}, key=lambda c: (c.attribute, c.operator, c.value)))
    cpu = float(resources.cpu) if resources is not None else 0.0
    memory = parse_memory(resources.memory) if resources is not None and resources.memory else 0
    if not normal and not cpu and not memory:
        return None
    return Placement(constraints=normal, cpu=cpu, memory=memory)


# -- matching ------------------------------------------------------------------------------------------------


def satisfies(placement: Placement | None, labels: dict[str, str]) -> bool:
    """Whether an executor with these labels may run a job with this placement."""
    if placement is None:
        return True
    if not all(_holds(c, labels.get(c.attribute)) for c in placement.constraints):
        return False
    cpu, memory = labels.get("cpu"), labels.get("memory")
    return _at_least(cpu, placement.cpu, float) and _at_least(memory, placement.memory, _bytes)


def fits(placement: Placement | None, labels: dict[str, str], reserved: list[Placement]) -> bool:
    """Whether the executor's capacity (its ``cpu`` and ``memory`` labels) minus what the attempts it runs reserved
    still holds this placement's resources: Nomad's reservation, per executor."""
    if placement is None or (not placement.cpu and not placement.memory):
        return True
    cpu = sum(taken.cpu for taken in reserved) + placement.cpu
    memory = sum(taken.memory for taken in reserved) + placement.memory
    return _at_least(labels.get("cpu"), cpu, float) and _at_least(labels.get("memory"), memory, _bytes)


def _holds(constraint: Constraint, label: str | None) -> bool:
    operator, value = constraint.operator, constraint.value
    if operator == "!=":
        return label != value
    if label is None:
        return False
    if operator == "=":
        return label == value
    if operator == "regexp":
        return _pattern(value).search(label) is not None
    return _items(value) <= _items(label)  # set_contains


def _at_least(label: str | None, wanted: float, read: Callable[[str], float]) -> bool:
    if not wanted:
        return True
    if label is None:
        return False
    try:
        have = read(label)
    except ValueError:  # MemoryFormatError is one
        return False
    return have >= wanted


def _bytes(label: str) -> int:
    """A ``memory`` label: plain bytes, or a size such as ``16g``."""
    return int(label) if label.isdigit() else parse_memory(label)


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _items(value: str) -> frozenset[str]:
    return frozenset(item.strip() for item in value.split(",") if item.strip())


# -- validation (the 400 bodies) -----------------------------------------------------------------------------


def constraints_problem(constraints: tuple[Constraint, ...]) -> str | None:
    """What is wrong with a job's constraints, as a 400 body; None when they are fine."""
    if len(constraints) > MAX_CONSTRAINTS:
        return f"Invalid constraints: at most {MAX_CONSTRAINTS} are allowed, got {len(constraints)}"
    for index, constraint in enumerate(constraints):
        problem = _constraint_problem(constraint)
        if problem is not None:
            return f"Invalid constraints[{index}]: {problem}"
    return None


def _constraint_problem(constraint: Constraint) -> str | None:
    name = attribute_name(constraint.attribute)
    if not name:
        return "attribute is required"
    if not _LABEL_KEY.fullmatch(name):
        return f"attribute {name!r} is not a label name (letters, digits, '.', '_', '-')"
    operator = _ALIASES.get(constraint.operator, constraint.operator)
    if operator not in OPERATORS:
        return f"unknown operator {constraint.operator!r}; use one of {', '.join(OPERATORS)}"
    if operator == "regexp":
        return _pattern_problem(constraint.value)
    if operator == "set_contains" and not _items(constraint.value):
        return "set_contains needs a value: a comma-separated list of items"
    return None


def _pattern_problem(pattern: str) -> str | None:
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"regexp is longer than {MAX_PATTERN_CHARS} characters"
    try:
        _pattern(pattern)
    except re.error as error:
        return f"invalid regexp {pattern!r}: {error}"
    return None


def resources_problem(resources: Resources | None) -> str | None:
    """What is wrong with a job's resources, as a 400 body; None when they are fine."""
    if resources is None:
        return None
    if resources.cpu < 0:
        return "Invalid resources: cpu cannot be negative"
    if resources.memory:
        try:
            parse_memory(resources.memory)
        except MemoryFormatError as error:
            return f"Invalid resources: memory {resources.memory!r} is not a size such as 512m or 2g ({error})"
    return None


# -- labels --------------------------------------------------------------------------------------------------


def parse_labels(text: str) -> dict[str, str]:
    """``os=linux,pool=gpu`` as a dict; raises LabelError naming the bad entry.

    An item without ``=`` continues the previous label's value as a list, so ``tools=java,node,os=linux`` gives
    ``tools`` the value ``java,node`` (for ``set_contains``).
    """
    labels: dict[str, str] = {}
    last: str | None = None
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        key, sep, value = (part.strip() for part in entry.partition("="))
        if not sep and last is not None:
            labels[last] += "," + entry
            continue
        if not sep or not _LABEL_KEY.fullmatch(key):
            raise LabelError(f"label {entry!r} is not key=value with a key of letters, digits, '.', '_', '-'")
        labels[key], last = value, key
    return labels


# -- words ---------------------------------------------------------------------------------------------------


def _describe(constraint: Constraint) -> str:
    attribute, operator, value = constraint.attribute, constraint.operator, constraint.value
    if operator == "regexp":
        return f"{attribute} matching {value}"
    if operator == "set_contains":
        return f"{attribute} containing {value}"
    return f"{attribute}{operator}{value}"


def _size(n: int) -> str:
    for unit, factor in (("g", 1024**3), ("m", 1024**2)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n} bytes"
