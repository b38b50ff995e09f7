"""The CLI's client commands (``submit``, ``status``, ``logs``, ``cancel``, ``events``, ``timing``, and ``stages add``
from inside a pipeline's stage), on ``Hades``.

Exit codes a script can rely on:

- 0: done; with ``--follow`` (``logs -f``), the job succeeded
- 1: the job failed or was stopped (``submit --follow``, ``logs -f``)
- 2: a usage error, an unreadable job file, or Hades refused the request (a bad job, an unknown job, no or wrong
  ``AUTH_KEY``, a cancel of an ended job); the server's message is printed
- 3: no answer from Hades (``HADES_API_URL`` unreachable, a timeout) or a server error (5xx): try again later

``--json`` prints the server's answers as JSON; with ``--follow`` (``-f``) one JSON object per line: ``{"job_id"}``
(submit), ``{"log": Log}`` per batch, then ``{"end": {"status", "reason"}}``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hades.client.blocking import Hades
from hades.client.calls import HadesClientError, HadesUnreachable, JobEnded
from hades.client.terminal import Display
from hades.config import Settings
from hades.core.logs import Log

OK, JOB_FAILED, REFUSED, UNREACHABLE = 0, 1, 2, 3
EXIT_CODES = (
    "exit codes: 0 done (with --follow: the job succeeded), 1 the job failed or was stopped, 2 a usage error or "
    "Hades refused the request, 3 Hades could not be reached or failed (5xx)"
)

Handler = Callable[[argparse.Namespace, Settings], int]


def add_client_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the client commands on the ``hades`` parser."""

    def command(name: str, help_text: str, handler: Handler, job_id: bool = True) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES)
        if job_id:
            parser.add_argument("job_id", metavar="JOB_ID")
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")
        parser.set_defaults(handler=_talking_to_hades(handler))
        return parser

    submit = command("submit", "submit a job file to a running Hades (HADES_API_URL)", _submit, job_id=False)
    submit.add_argument("file", type=Path, help="a job as JSON (the POST /build body); - for standard input")
    submit.add_argument("--follow", "-f", action="store_true", help="print its logs live and exit with its outcome")
    submit.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="a key of yours standing for this one job: submitting again with it (a retry after an error) prints "
        "the same job id instead of making a second job",
    )
    command("status", "print a job's status", _status)
    logs = command("logs", "print a job's logs", _logs)
    logs.add_argument("--follow", "-f", action="store_true", help="live until the job ends; exit with its outcome")
    logs.add_argument("--attempt", type=int, help="an earlier attempt's logs (default: the attempt the job is at)")
    cancel = command("cancel", "stop a queued or running job", _cancel)
    cancel.add_argument("--reason", default="", help="why, recorded in the job's history")
    command("events", "print a job's history", _events)
    command("timing", "where a job's time went, phase by phase", _timing)
    stages = commands.add_parser("stages", help="a pipeline's stages (docs/pipelines.md)")
    verbs = stages.add_subparsers(dest="stages_verb", required=True)
    add_help = (
        "from inside a pipeline's stage: add the stages in FILE to its pipeline (HADES_API_URL, HADES_PIPELINE_ID, "
        "HADES_PIPELINE_TOKEN and HADES_STAGE are read from the environment the stage gets)"
    )
    add = verbs.add_parser("add", help=add_help, description=add_help, epilog=EXIT_CODES)
    add.add_argument("file", type=Path, help='{"stages": [...]} or a list of stages, as JSON; - for standard input')
    add.add_argument("--json", action="store_true", help="print JSON for scripts")
    add.set_defaults(handler=_talking_to_hades(_add_stages))


def _talking_to_hades(handler: Handler) -> Handler:
    """The handler with Hades's refusals and silences turned into their exit codes."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace, settings: Settings) -> int:
        try:
            return handler(args, settings)
        except HadesUnreachable as error:
            print(f"hades: {error.message}", file=sys.stderr)
            return UNREACHABLE
        except HadesClientError as error:
            print(f"hades: {error.status}: {error.message}{_hint(error.status, settings)}", file=sys.stderr)
            return UNREACHABLE if error.status is not None and error.status >= 500 else REFUSED

    return run


def _hint(status: int | None, settings: Settings) -> str:
    """What to do about a refusal the server's message does not explain: a 401 is the API's key."""
    if status != 401:
        return ""
    if settings.auth_key:
        return " (the AUTH_KEY set here is not the one this Hades was started with)"
    return " (this Hades needs its key: set AUTH_KEY to the one it was started with)"


def _hades(settings: Settings) -> Hades:
    return Hades(settings.client_api_url, settings.auth_key)


def _print_json(value: Any, lines: bool = False) -> None:
    print(json.dumps(value) if lines else json.dumps(value, indent=2), flush=True)


def _submit(args: argparse.Namespace, settings: Settings) -> int:
    try:
        body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    except OSError as error:
        print(f"hades: {error}", file=sys.stderr)
        return REFUSED
    with _hades(settings) as hades:
        job_id = hades.submit(body, args.idempotency_key)
        if args.json:
            _print_json({"job_id": job_id}, lines=args.follow)
        else:
            print(job_id, flush=True)
        return _follow(hades, job_id, args.json) if args.follow else OK


def _add_stages(args: argparse.Namespace, settings: Settings) -> int:
    pipeline_id, token = os.environ.get("HADES_PIPELINE_ID", ""), os.environ.get("HADES_PIPELINE_TOKEN", "")
    if not pipeline_id or not token:
        print("hades: HADES_PIPELINE_ID and HADES_PIPELINE_TOKEN are not set: run this inside a stage", file=sys.stderr)
        return REFUSED
    try:
        raw = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
        body = json.loads(raw)
    except (OSError, ValueError) as error:
        print(f"hades: {error}", file=sys.stderr)
        return REFUSED
    stages = body.get("stages") if isinstance(body, dict) else body
    with Hades(settings.client_api_url, "") as hades:  # the pipeline's token, not AUTH_KEY
        answer = hades.add_stages(pipeline_id, stages if isinstance(stages, list) else [], token)
    if args.json:
        _print_json(answer)
    else:
        print(f"added to pipeline {pipeline_id}: {', '.join(answer['stages'])}", flush=True)
    return OK


def _logs(args: argparse.Namespace, settings: Settings) -> int:
    with _hades(settings) as hades:
        if args.follow:
            return _follow(hades, args.job_id, args.json)
        logs = hades.logs(args.job_id, args.attempt)
    if args.json:
        _print_json({"logs": [log.wire() for log in logs]})
        return OK
    display = Display()
    for log in logs:
        for entry in log.logs or []:
            display.log(entry)
    return OK


def _follow(hades: Hades, job_id: str, as_json: bool) -> int:
    """The job's lines as they are written, then its status: exit 0 when it succeeded, 1 otherwise."""
    display = Display()
    progress = _Progress(hades, job_id, display)
    end: JobEnded | None = None
    for item in hades.follow(job_id):
        if isinstance(item, JobEnded):
            end = item
        elif as_json:
            _print_json({"log": item.wire()}, lines=True)
        else:
            progress.seen(item)
            for entry in item.logs or []:
                display.log(entry)
    display.done()
    assert end is not None  # the stream ends with the job's end
    if as_json:
        _print_json({"end": {"status": end.status, "reason": end.reason}}, lines=True)
    else:
        display.say(display.status(end.status))
        if end.reason:
            display.say(f"reason: {end.reason}", error=True)
    return OK if end.status == "Succeeded" else JOB_FAILED


class _Progress:
    """The progress line on a terminal: the job's status and its current step, read again when a step starts
    writing (a new container), so nothing is polled."""

    def __init__(self, hades: Hades, job_id: str, display: Display) -> None:
        self._hades, self._job_id, self._display = hades, job_id, display
        self._containers: set[str] = set()
        self._lines = 0
        self._status, self._step = "", ""
        self._refresh()

    def seen(self, batch: Log) -> None:
        """A batch arrived."""
        if not self._display.live:
            return
        self._lines += len(batch.logs or [])
        if batch.container_id not in self._containers:
            self._containers.add(batch.container_id)
            self._refresh()
        else:
            self._draw()

    def _refresh(self) -> None:
        if not self._display.live:
            return
        job = self._hades.job(self._job_id)
        self._status = job["status"]
        steps = job["steps"]
        running = [s for s in steps if s["status"] == "Running"]
        self._step = f"step {running[0]['index'] + 1}/{len(steps)} {running[0]['name']}" if running else ""
        self._draw()

    def _draw(self) -> None:
        parts = [self._display.status(self._status), self._step, f"{self._lines} lines"]
        self._display.progress("● " + " · ".join(part for part in parts if part))


def _status(args: argparse.Namespace, settings: Settings) -> int:
    with _hades(settings) as hades:
        status = hades.status(args.job_id)
    if args.json:
        _print_json({"status": status})
    else:
        print(Display().status(status))
    return OK


def _cancel(args: argparse.Namespace, settings: Settings) -> int:
    with _hades(settings) as hades:
        accepted = hades.cancel(args.job_id, args.reason)
    if args.json:
        _print_json(accepted)
        return OK
    status = Display().status(accepted["status"])
    print(status if accepted["status"] == "Stopped" else f"{status}: cancel requested")
    return OK


def _events(args: argparse.Namespace, settings: Settings) -> int:
    with _hades(settings) as hades:
        events = hades.events(args.job_id)
    if args.json:
        _print_json([event.row for event in events])
        return OK
    display = Display()
    for event in events:
        details = " ".join(f"{k}={v}" for k, v in event.row.items() if k not in ("seq", "type", "at"))
        print(f"{event.seq:>8}  {event.row['at']}  {display.paint(f'{event.type:<14}', '1')} {details}")
    return OK


def _timing(args: argparse.Namespace, settings: Settings) -> int:
    with _hades(settings) as hades:
        timing = hades.timing(args.job_id) or {}
    if args.json:
        _print_json(timing)
        return OK
    for name, seconds in (timing.get("phases") or {}).items():
        print(f"{name:<12} {_seconds(seconds)}")
    print(f"{'total':<12} {_seconds(timing.get('total'))}")
    print(f"{'overhead':<12} {_seconds(timing.get('overhead'))}  ({timing.get('overhead_pct')} %)")
    return OK


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:10.1f} ms"
