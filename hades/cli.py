"""``hades ...``: run the roles, manage the topology, and talk to a running Hades."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hades.adapters.k8s.buildjob import buildjob_manifest
from hades.adapters.k8s.pods import pod_manifest
from hades.client.cli import add_client_commands
from hades.config import Settings, load_settings
from hades.core.go_request import parse_job_request
from hades.doctor import doctor as run_doctor
from hades.doctor_checks import settings_problems
from hades.http.dashboard.config import DashboardConfigError
from hades.streams_show import EXIT_CODES as streams_exit_codes
from hades.streams_show import streams_show as show_streams
from hades.streams_show import tool_nats_url
from hades.up import apply_topology, ensure_free, run_async, up

log = logging.getLogger("hades")

DEFAULT_NATS_URL = "nats://localhost:4222"


def main(argv: list[str] | None = None) -> int:
    """The console script's entry point."""
    args = _parser().parse_args(argv)
    standalone: Callable[[argparse.Namespace], int] | None = getattr(args, "standalone", None)
    if standalone is not None:  # `hades doctor` loads (and judges) the settings itself
        logging.basicConfig(level=logging.WARNING)
        return standalone(args)
    try:
        settings = load_settings()
    except ValidationError as error:
        for problem in settings_problems(error):
            print(f"hades: {problem.message}; {problem.fix}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if settings.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request's full URL at INFO: callback URLs may carry tokens in their query.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    handler: Callable[[argparse.Namespace, Settings], int] = args.handler
    try:
        return handler(args, settings)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, OSError, DashboardConfigError) as error:
        print(f"hades: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hades", description="A container job scheduler on NATS JetStream.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    up_command = commands.add_parser(
        "up",
        help="run every role in one process, on an embedded nats-server",
        description="Run the API, scheduler, executor (HADES_EXECUTOR, Docker by default) and notifier in one "
        "process. Without NATS_URL it starts its own nats-server, keeping the JetStream store in HADES_DATA_DIR "
        "(./.hades), which only one `hades up` may use at a time, and applies streams.yaml first; it exits with an "
        "error if that server dies. The API listens on API_PORT (8080). Ctrl-C or SIGTERM stops it gracefully, a "
        "second one at once; a restart from the same folder resumes where it stopped.",
    )
    up_command.set_defaults(handler=_up)
    for role in ("api", "scheduler", "executor", "notifier", "logmanager"):
        sub = commands.add_parser(role, help=_ROLES[role])
        sub.set_defaults(handler=_role, role=role)

    operator = commands.add_parser("operator", help="reconcile BuildJobs into Pods (Kubernetes operator mode)")
    operator.add_argument(
        "--health-probe-bind-address", metavar="[HOST]:PORT", help="/healthz and /readyz (default :8081)"
    )
    operator.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="campaign for the Lease so that only one replica reconciles (default on)",
    )
    operator.set_defaults(handler=_operator)

    streams = commands.add_parser("streams", help="the NATS topology from streams.yaml: apply it, or show it live")
    streams_commands = streams.add_subparsers(required=True, metavar="ACTION")
    streams_apply = streams_commands.add_parser(
        "apply", help="create or update the streams, consumers, buckets and object stores of streams.yaml (NATS_URL)"
    )
    streams_apply.add_argument("--json", action="store_true", help="print JSON: {created, updated, unchanged}")
    streams_apply.add_argument(
        "--replicas",
        type=int,
        choices=range(1, 6),
        metavar="N",
        help="copies of every stream, bucket and object store, 1 to 5 (3 on a NATS cluster)",
    )
    streams_apply.set_defaults(handler=_streams_apply)
    show_help = "each stream, bucket, object store and durable consumer, live, and whether it matches streams.yaml"
    streams_show = streams_commands.add_parser(
        "show", help=show_help, description=f"{show_help} (NATS_URL).", epilog=streams_exit_codes
    )
    streams_show.add_argument("--json", action="store_true", help="print JSON: stores, consumers, problems, ok")
    streams_show.set_defaults(handler=show_streams)

    doctor_help = (
        "check that settings, NATS, the topology and the executor's engine are ready, with the fix for each problem"
    )
    doctor = commands.add_parser(
        "doctor",
        help=doctor_help,
        description=f"{doctor_help}.",
        epilog="exit codes: 0 nothing failed, 1 a check failed",
    )
    doctor.add_argument("--json", action="store_true", help='print JSON: {"ok", "checks": [{"name", "level", ...}]}')
    doctor.set_defaults(standalone=run_doctor)

    add_client_commands(commands)

    replay = commands.add_parser(
        "replay",
        help="rebuild every read model from the event log (NATS_URL) and print a summary",
        description="Replay HADES_EVENTS from its first event into every read model (jobs, metrics, timing), as an "
        "API replica does at start-up, and print what was read: the events and the last sequence, how long it took "
        "and how fast, and the jobs per status. It only reads: nothing is written or changed.",
    )
    replay.add_argument("--until", help="a stream sequence or an ISO 8601 time: the world as it was then")
    replay.add_argument(
        "--json",
        action="store_true",
        help="print JSON: events, last_seq, seconds, events_per_second, jobs, metrics (statusCounts, ...)",
    )
    replay.set_defaults(handler=_replay)

    config = commands.add_parser("config", help="print the effective settings (environment and .env), secrets masked")
    config.add_argument("--json", action="store_true", help="print JSON: {section: {VARIABLE: value}}")
    config.set_defaults(handler=_config)

    k8s = commands.add_parser("k8s", help="Kubernetes tools")
    k8s_commands = k8s.add_subparsers(required=True, metavar="ACTION")
    manifest = k8s_commands.add_parser("manifest", help="print the Pod (or BuildJob) a job file would become, as YAML")
    manifest.add_argument("file", type=Path, help="a job as JSON (the POST /build body); - for standard input")
    manifest.add_argument("--operator", action="store_true", help="the BuildJob for the operator instead of the Pod")
    manifest.add_argument("--json", action="store_true", help="print it as JSON instead of YAML")
    manifest.set_defaults(handler=_k8s_manifest)
    _describe(parser)
    return parser


_ROLES = {
    "api": "run the HTTP API (POST /build, /jobs..., the dashboard) against NATS_URL",
    "scheduler": "run the scheduler (queues jobs, retries lost attempts, timeouts) against NATS_URL",
    "executor": "run an executor (HADES_EXECUTOR: docker, process, k8s) that takes queued jobs from NATS_URL",
    "notifier": "run the notifier (status webhooks and log forwarding) against NATS_URL",
    "logmanager": "serve the Go Log Manager's routes alone on LOG_MANAGER_PORT, against NATS_URL",
}


def _describe(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's ``--help`` opens with its description: its one-line help where it has no longer one."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                if sub.description is None and choice.help:
                    sub.description = choice.help[0].upper() + choice.help[1:] + "."
                _describe(sub)


# -- roles ------------------------------------------------------------------------------------------------------


def _up(_args: argparse.Namespace, settings: Settings) -> int:
    return up(settings)


def _role(args: argparse.Namespace, settings: Settings) -> int:
    from hades.runtime import Roles, serve

    if args.role == "api":
        ensure_free("API_PORT", settings.api_host, settings.api_port)
    roles = Roles(**{args.role: True})
    run_async(serve(settings, roles, settings.nats_url or DEFAULT_NATS_URL))
    return 0


def _operator(args: argparse.Namespace, settings: Settings) -> int:
    from hades.runtime import Roles, serve

    flags = {"health_probe_bind_address": args.health_probe_bind_address, "leader_elect": args.leader_elect}
    settings = settings.model_copy(update={key: value for key, value in flags.items() if value is not None})
    run_async(serve(settings, Roles(operator=True), settings.nats_url or DEFAULT_NATS_URL))
    return 0


def _streams_apply(args: argparse.Namespace, settings: Settings) -> int:
    if args.replicas is not None:
        settings = settings.model_copy(update={"stream_replicas": args.replicas})
    report = run_async(apply_topology(settings.nats_url or DEFAULT_NATS_URL, settings, quiet=args.json))
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    return 0


# -- tools (the client commands are in hades.client.cli) ----------------------------------------------------------


def _k8s_manifest(args: argparse.Namespace, settings: Settings) -> int:
    """The manifest for review or ``kubectl apply --dry-run=server -f -``; the job id is the file's, else a new one."""
    body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    try:
        spec, _ = settings.timeout_policy.applied(parse_job_request(body))  # as the API would accept it
        job_id = str(spec.id or uuid.uuid4())
        if args.operator:
            manifest = buildjob_manifest(job_id, spec, settings.k8s_namespace, max_retries=settings.max_attempts - 1)
        else:
            from hades.executor_role import pod_settings  # the roles' imports only when a manifest is asked for

            manifest = pod_manifest(job_id, 1, spec, pod_settings(settings))
    except ValueError as error:  # SpecError, BuildJobError, PodSpecError
        print(f"hades: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(manifest, indent=2))
    else:
        print(yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True), end="")
    return 0


def _replay(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from hades.http.views import parse_moment

    until_seq = until_time = None
    if args.until is not None:
        if args.until.isdigit():
            until_seq = int(args.until)
        elif (until_time := parse_moment(args.until)) is None:
            print(
                f"hades: --until {args.until!r} is neither a sequence nor an ISO 8601 time with a zone", file=sys.stderr
            )
            return 2
    summary: dict[str, Any] = {}

    async def run() -> None:
        from hades.adapters.nats.connection import connect_once
        from hades.adapters.nats.event_store import NatsEventStore
        from hades.replay import replay

        nc = await connect_once(
            tool_nats_url(settings), settings.nats_username, settings.nats_password, settings.nats_tls_enabled
        )
        try:
            store = NatsEventStore(nc)
            report = await replay(store, await store.stream_last_seq(), until_seq, until_time)
        finally:
            await nc.close()
        summary.update(report.summary(until_time or datetime.now(UTC)))

    run_async(run())
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"events read   {summary['events']} (up to sequence {summary['last_seq']})")
    print(f"time          {summary['seconds']} s, {summary['events_per_second']} events/s")
    print(f"jobs          {summary['jobs']}")
    for status, count in sorted(summary["metrics"]["statusCounts"].items()):
        print(f"  {status:<11} {count}")
    return 0


def _config(args: argparse.Namespace, settings: Settings) -> int:
    from hades.docs import env_value, shown_settings

    shown = shown_settings(settings)
    if args.json:
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    for title, values in shown.items():
        print(f"# {title}")
        for variable, value in values.items():
            print(f"# {variable} (unset)" if value is None else f"{variable}={env_value(value)}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
