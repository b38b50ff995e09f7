"""``hades doctor``: is this machine ready to run Hades, and if not, what to do about it.

One PASS/WARN/FAIL (or INFO) line per check, each problem with its fix in one sentence (the checks are in
:mod:`hades.doctor_checks`). Exit code 0 when nothing FAILed, 1 otherwise. Colour on a terminal, plain text when
piped, ``--json`` for scripts: ``{"ok": bool, "checks": [{"name", "level", "message", "fix"}]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict

from pydantic import ValidationError

from hades import doctor_checks as checks
from hades.adapters.nats.connection import NatsUnreachable, connect_once
from hades.adapters.nats.topology_state import inspect
from hades.client.terminal import Display
from hades.config import Settings, load_settings
from hades.doctor_checks import Check
from hades.streams_show import declared_topology, tool_nats_url

HEALTHY, UNHEALTHY = 0, 1
_COLOURS = {"PASS": "32", "WARN": "33", "FAIL": "31", "INFO": "34"}


def doctor(args: argparse.Namespace) -> int:
    """The command; it loads the settings itself, since a bad one is among the things it reports."""
    try:
        settings = load_settings()
    except ValidationError as error:
        found = [
            *checks.settings_problems(error),
            Check("other checks", "INFO", "not run: they need settings that load"),
        ]
    else:
        found = asyncio.run(diagnose(settings))
    failed = any(check.level == "FAIL" for check in found)
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [asdict(check) for check in found]}, indent=2))
    else:
        _print(found)
    return UNHEALTHY if failed else HEALTHY


async def diagnose(settings: Settings) -> list[Check]:
    """Every check, in the order a person would fix things: settings, NATS, topology, the executor's engine."""
    found = [*checks.settings_loaded(settings), checks.dashboard(settings)]
    url = tool_nats_url(settings)
    try:
        nc = await connect_once(url, settings.nats_username, settings.nats_password, settings.nats_tls_enabled)
    except NatsUnreachable as error:
        found.append(Check("nats", "FAIL", str(error), _nats_fix(settings)))
        found.append(Check("topology", "INFO", "not checked: NATS is unreachable"))
    else:
        try:
            server = await checks.nats_server(nc, url)
            found.extend(server)
            if all(check.level != "FAIL" for check in server):
                found.append(checks.topology(await inspect(nc.jetstream(), declared_topology(settings))))
                found.append(await checks.executors_alive(nc))
        finally:
            await nc.close()
    found.append(await _executor_engine(settings))
    return found


def _nats_fix(settings: Settings) -> str:
    if settings.nats_url is None:
        return "start Hades with `hades up` (it runs its own nats-server), or set NATS_URL to your NATS server"
    return "start that NATS server, or correct NATS_URL (and NATS_USERNAME, NATS_PASSWORD, NATS_TLS_ENABLED)"


async def _executor_engine(settings: Settings) -> Check:
    if settings.executor == "docker":
        return await checks.docker_engine(settings)
    if settings.executor == "process":
        return checks.process_workspaces(settings)
    return await checks.kubernetes_config(settings)


def _print(found: list[Check]) -> None:
    display = Display()
    width = max(len(check.name) for check in found)
    for check in found:
        print(f"{display.paint(f'{check.level:<4}', _COLOURS[check.level])}  {check.name:<{width}}  {check.message}")
        if check.fix:
            print(f"{'':<4}  {'':<{width}}  fix: {check.fix}")
    failed = sum(1 for check in found if check.level == "FAIL")
    warned = sum(1 for check in found if check.level == "WARN")
    if failed or warned:
        print(f"\n{failed} failed, {warned} warning(s)")
    else:
        print("\nall good")
