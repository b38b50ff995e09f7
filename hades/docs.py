"""Documents generated from the code, so that they cannot drift from it.

``.env.example`` and ``docs/configuration.md`` come from :class:`hades.config.Settings` (its sections, each
setting's description and default; a secret's value never), ``docs/events.md`` from the event union in
:mod:`hades.core.events` (each kind's subject, docstring and fields). ``python -m hades.docs`` writes them;
``--check`` writes nothing and exits 1 naming each file that differs, as ``tests/test_docs.py`` does.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from hades.config import Settings, is_secret
from hades.core import events
from hades.core.redact import MASK, Redactor
from hades.core.spec import JobSpec

REGENERATE = "python -m hades.docs"
"""The command that rewrites every generated document (from the repository root)."""

GENERATED = f"Generated from the code by `{REGENERATE}`: edit the code, not this file."

# A section of Settings starts at a comment on a line of its own after a blank line, in the source of the classes
# Settings is composed of; its fields follow, into the next class until another section starts.
_SECTION = re.compile(r"^    # (?P<title>.+)$")
_FIELD = re.compile(r"^    (?P<attr>[a-z_][a-z0-9_]*): ")

# The kinds whose subject has more tokens than the type tag (their ``subject_token`` says how).
_SUBJECT_TOKENS = {"queued": "queued.<priority>[.<pool>]"}


@dataclass(frozen=True)
class Setting:
    """One environment variable of :class:`Settings`."""

    attribute: str
    field: FieldInfo

    @property
    def variable(self) -> str:
        """The environment variable's name."""
        return str(self.field.validation_alias)

    @property
    def secret(self) -> bool:
        """Whether its value is never shown."""
        return is_secret(self.field)

    @property
    def default(self) -> str | None:
        """The default as it would be written in the environment; None when unset or computed at start-up."""
        if self.field.default_factory is not None or self.field.default is None:
            return None
        return "" if self.secret else env_value(self.field.default)

    @property
    def description(self) -> str:
        """What it does, in one line."""
        return self.field.description or ""


def env_value(value: object) -> str:
    """``value`` as an environment variable would spell it (``true``, ``300``, ``if-not-present``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def settings_by_section() -> dict[str, list[Setting]]:
    """Every setting, grouped under the comments that head the sections of :class:`Settings` (in its order)."""
    sections: dict[str, list[Setting]] = {}
    section = "general"
    lines = [line for part in _settings_parts() for line in inspect.getsource(part).splitlines()]
    for previous, line in zip(["", *lines], lines, strict=False):
        if (match := _SECTION.match(line)) and not previous.strip():
            section = match["title"]
        elif (match := _FIELD.match(line)) and match["attr"] in Settings.model_fields:
            field = Settings.model_fields[match["attr"]]
            sections.setdefault(section, []).append(Setting(match["attr"], field))
    found = {setting.variable for group in sections.values() for setting in group}
    missing = {str(field.validation_alias) for field in Settings.model_fields.values()} - found
    if missing:  # a field declared in a way the scan above does not see must not vanish from the documents
        raise RuntimeError(f"settings not found in the source of hades/config/: {sorted(missing)}")
    return sections


def _settings_parts() -> list[type]:
    """The classes :class:`Settings` is composed of that declare its fields, in the order pydantic gives the fields
    (its bases from the last to the first)."""
    fields = Settings.model_fields.keys()
    return [part for part in reversed(Settings.__mro__) if fields & inspect.get_annotations(part).keys()]


def shown_settings(settings: Settings) -> dict[str, dict[str, Any]]:
    """The values of ``settings`` as JSON values, by section and variable, fit to be shown.

    A secret that is set shows as :data:`MASK`, and a password inside a URL is masked too
    (``nats://user:password@host``), so the output can be pasted into an issue.
    """
    values = settings.model_dump(mode="json")
    shown: dict[str, dict[str, Any]] = {}
    for title, group in settings_by_section().items():
        for setting in group:
            value = values[setting.attribute]
            if setting.secret and value:
                value = MASK
            elif isinstance(value, str) and "://" in value:
                value = Redactor().text(value)
            shown.setdefault(title, {})[setting.variable] = value
    return shown


# -- .env.example -------------------------------------------------------------------------------------------------


def render_env_example() -> str:
    """Every variable with its description; set to its default, or commented out when it has none."""
    out = [
        "# Every environment variable Hades reads, with its default. Copy to .env and change what you need:",
        "# a commented-out line is unset (Hades then computes or does without it).",
        f"# {GENERATED}",
    ]
    for title, settings in settings_by_section().items():
        out += ["", "", *_comment(title)]
        for setting in settings:
            out += ["", *_comment(setting.description)]
            if setting.secret:
                out += _comment("(a secret: keep it out of version control)")
            value = setting.default
            out.append(f"# {setting.variable}=" if value is None else f"{setting.variable}={value}")
    return "\n".join(out) + "\n"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, width=118, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)


# -- docs/configuration.md -------------------------------------------------------------------------------------


def render_configuration() -> str:
    """A table per section of :class:`Settings`: variable, default, meaning."""
    out = [
        "# Configuration",
        "",
        f"<!-- {GENERATED} -->",
        "",
        "Every setting is an environment variable, also read from a `.env` file in the working directory (the",
        "environment wins). Names follow the Go Hades where it has one. `.env.example` lists the same variables with",
        "their defaults; `hades config` prints the values a process would run with, secrets masked.",
    ]
    for title, settings in settings_by_section().items():
        out += ["", f"## {title[0].upper()}{title[1:]}", "", "| Variable | Default | Meaning |", "|---|---|---|"]
        for setting in settings:
            meaning = f"**Secret.** {setting.description}" if setting.secret else setting.description
            out.append(f"| `{setting.variable}` | {_default_cell(setting)} | {_cell(meaning)} |")
    return "\n".join(out) + "\n"


def _default_cell(setting: Setting) -> str:
    value = setting.default
    if value is None:
        return "unset"
    return f"`{value}`" if value else "empty"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# -- docs/events.md -------------------------------------------------------------------------------------------------


def event_kinds() -> list[type[BaseModel]]:
    """The classes of the event union, in its order."""
    union = get_args(events.Event)[0]
    return [kind for kind in get_args(union) if isinstance(kind, type) and issubclass(kind, BaseModel)]


def event_tag(kind: type[BaseModel]) -> str:
    """The stable ``type`` tag of an event class."""
    return str(kind.model_fields["type"].default)


def subject(kind: type[BaseModel]) -> str:
    """The subject an event of ``kind`` is appended on, with placeholders."""
    tag = event_tag(kind)
    owner = next(base for base in kind.__mro__ if "subject_token" in vars(base))
    if owner.__module__ == events.__name__ and owner.__name__ == "_Event":
        return f"hades.events.<job_id>.{tag}"
    if tag not in _SUBJECT_TOKENS:
        raise RuntimeError(f"{kind.__name__} has its own subject_token: describe it in hades.docs._SUBJECT_TOKENS")
    return f"hades.events.<job_id>.{_SUBJECT_TOKENS[tag]}"


def render_events() -> str:
    """Every event kind: subject, docstring, and a table of its fields; then the types the fields use."""
    intro = _markdown(inspect.getdoc(events) or "")
    out = ["# Events", "", f"<!-- {GENERATED} -->", "", intro, ""]
    out += ["| Kind | Subject |", "|---|---|"]
    kinds = event_kinds()
    out += [f"| [`{event_tag(kind)}`](#{event_tag(kind)}) | `{subject(kind)}` |" for kind in kinds]
    nested: dict[str, type[Any]] = {}
    for kind in kinds:
        out += ["", f"## {event_tag(kind)}", "", f"`{kind.__name__}` on `{subject(kind)}`", ""]
        out += [_markdown(inspect.getdoc(kind) or ""), ""]
        out += _field_table(kind, nested, skip={"type"})
    out += _types_section(nested)
    return "\n".join(out) + "\n"


def _field_table(model: type[BaseModel], nested: dict[str, type[Any]], skip: set[str] | None = None) -> list[str]:
    out = ["| Field | Type | Required / default | Meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if skip and name in skip:
            continue
        kind = _type_name(field.annotation, nested.setdefault)
        out.append(f"| `{name}` | {_cell(kind)} | {_requirement(field)} | {_cell(field.description or '')} |")
    return out


def _requirement(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    default = field.get_default(call_default_factory=True)
    if isinstance(default, Enum):
        default = default.value
    return f"`{default!r}`" if default is not None else "`None`"


def _type_name(annotation: Any, seen: Callable[[str, type[Any]], object]) -> str:
    """A readable name for a field's type, noting the enums and models it uses in ``seen``."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(arg, seen) for arg in args)
    if origin is Literal:
        return " | ".join(f"`{arg!r}`" for arg in args)
    if origin is not None:
        inner = ", ".join("..." if arg is Ellipsis else _type_name(arg, seen) for arg in args)
        return f"{origin.__name__}[{inner}]"
    if isinstance(annotation, type) and issubclass(annotation, Enum | BaseModel):
        seen(annotation.__name__, annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation))


def _types_section(nested: dict[str, type[Any]]) -> list[str]:
    out = ["", "## Types the fields use"]
    for name, kind in sorted(nested.items()):
        out += ["", f"### {name}", "", _markdown(inspect.getdoc(kind) or "")]
        if kind is JobSpec:
            out += ["", "The `POST /build` body after validation; its fields are declared in `hades/core/spec.py`."]
        elif issubclass(kind, Enum):
            out += ["", "Values: " + ", ".join(f"`{member.value}`" for member in kind) + "."]
        elif issubclass(kind, BaseModel):
            out += ["", *_field_table(kind, {})]
    return out


def _markdown(docstring: str) -> str:
    """A docstring as Markdown: reST literals become code spans, reST roles lose their role."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", docstring)
    return text.replace("``", "`")


# -- writing and checking -----------------------------------------------------------------------------------------

DOCUMENTS: dict[str, Callable[[], str]] = {
    ".env.example": render_env_example,
    "docs/configuration.md": render_configuration,
    "docs/events.md": render_events,
}
"""Each generated file, relative to the repository root, and what renders it."""


def stale(root: Path) -> Iterator[tuple[str, str]]:
    """(path, what it should hold) for each generated file under ``root`` that differs from the code."""
    for path, render in DOCUMENTS.items():
        expected = render()
        target = root / path
        if not target.is_file() or target.read_text(encoding="utf-8") != expected:
            yield path, expected


def main(argv: list[str] | None = None) -> int:
    """``python -m hades.docs [--check] [--root DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m hades.docs", description="Write the documents generated from the code."
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository root (default: here)")
    args = parser.parse_args(argv)
    changed = list(stale(args.root))
    for path, expected in changed:
        if args.check:
            print(f"{path} differs from the code: run `{REGENERATE}`", file=sys.stderr)
            continue
        (args.root / path).parent.mkdir(parents=True, exist_ok=True)
        (args.root / path).write_text(expected, encoding="utf-8")
        print(f"wrote {path}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
