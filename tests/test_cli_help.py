"""Every ``hades`` subcommand explains itself: ``--help`` through the real entry point opens with a description,
and every command that prints data offers ``--json``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from hades.cli import _parser

# Commands that print data a script may want; the roles, `up` and `operator` only run.
PRINTS_DATA = {
    "submit", "status", "logs", "cancel", "events", "timing", "replay", "config", "doctor",
    "streams apply", "streams show", "k8s manifest",
}  # fmt: skip


def subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path (``("streams",)``, ``("streams", "show")``), read from the parser the console script
    builds."""
    found: list[tuple[str, ...]] = [prefix] if prefix else []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(subcommands(sub, (*prefix, name)))
    return found


def test_every_subcommand_help_has_a_description() -> None:
    commands = subcommands(_parser())
    assert ("doctor",) in commands and ("streams", "show") in commands and len(commands) >= 21
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NATS_", "HADES_", "API_"))}

    def helped(command: tuple[str, ...]) -> tuple[tuple[str, ...], subprocess.CompletedProcess[str]]:
        done = subprocess.run(
            [sys.executable, "-m", "hades.cli", *command, "--help"], env=env, capture_output=True, text=True, timeout=60
        )
        return command, done

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(helped, commands))
    problems = []
    for command, done in results:
        name = " ".join(command)
        if done.returncode != 0:
            problems.append(f"hades {name} --help exited {done.returncode}: {done.stderr}")
            continue
        # argparse prints usage, a blank line, then the description (if any) before the argument sections.
        paragraphs = done.stdout.split("\n\n")
        description = paragraphs[1].strip() if len(paragraphs) > 1 else ""
        if not description or description.startswith(("options:", "positional arguments:")):
            problems.append(f"hades {name} --help has no description")
        if name in PRINTS_DATA and "--json" not in done.stdout:
            problems.append(f"hades {name} prints data but has no --json")
    assert not problems, "\n".join(problems)
