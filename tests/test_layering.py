"""The import contract: dependencies point inwards.

``hades/core`` imports only the standard library, pydantic and itself; ``hades/projections`` may add
``hades.core``. The check reads the source with ``ast``, so it also sees imports under ``TYPE_CHECKING`` and inside
functions, and it never imports the modules it checks.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

HADES = Path(__file__).resolve().parent.parent / "hades"
STDLIB = frozenset(sys.stdlib_module_names)

CONTRACTS = {
    "core": ("pydantic", "hades.core"),
    "projections": ("pydantic", "hades.core", "hades.projections"),
}


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in a module of ``package`` (e.g. ``hades.core``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's own package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                found.append((node.lineno, f"{base}.{node.module}" if node.module else base))
            else:
                found.append((node.lineno, node.module or ""))
    return found


def is_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    top = module.partition(".")[0]
    if top in STDLIB:
        return True
    return any(module == prefix or module.startswith(prefix + ".") for prefix in allowed)


def violations(folder: str) -> list[str]:
    allowed = CONTRACTS[folder]
    package = f"hades.{folder}"
    problems = []
    for path in sorted((HADES / folder).glob("*.py")):
        for line, module in imported_modules(path.read_text(encoding="utf-8"), package):
            if not is_allowed(module, allowed):
                problems.append(f"{path.relative_to(HADES.parent)}:{line} imports {module}")
    return problems


@pytest.mark.parametrize("folder", sorted(CONTRACTS))
def test_layer_imports_only_what_its_contract_allows(folder: str) -> None:
    assert list((HADES / folder).glob("*.py")), f"hades/{folder} has no modules to check"
    assert violations(folder) == []


def test_the_check_catches_what_it_should() -> None:
    source = """
import json, os.path
import nats
from typing import TYPE_CHECKING
from pydantic import BaseModel
from hades.core.events import Event
from hades.adapters.docker import containers
from . import errors
from .spec import JobSpec
from .. import config
if TYPE_CHECKING:
    from faststream import FastStream
def late():
    import aiodocker
"""
    bad = [m for _, m in imported_modules(source, "hades.core") if not is_allowed(m, CONTRACTS["core"])]
    assert bad == ["nats", "hades.adapters.docker", "hades", "faststream", "aiodocker"]


def test_projections_may_use_core_but_core_may_not_use_projections() -> None:
    assert is_allowed("hades.core.lifecycle", CONTRACTS["projections"])
    assert not is_allowed("hades.projections.jobs", CONTRACTS["core"])
    assert not is_allowed("hades.corex", CONTRACTS["core"])
    assert not is_allowed("pydantic_settings", CONTRACTS["core"])
