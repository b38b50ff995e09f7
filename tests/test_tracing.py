"""Tracing: one trace per job, API → scheduler → executor → each step, carried between processes in the events'
``traceparent`` headers; exported over OTLP/HTTP when an endpoint is set; off (no provider, no header) otherwise."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.subjects import job_events
from hades.adapters.nats.topology import EVENTS_STREAM
from hades.clock import SystemClock
from hades.config import Settings
from hades.core.lifecycle import RequestCancel, SubmitJob, decide
from hades.core.spec import JobSpec, Step
from hades.runtime import Roles
from hades.tracing import (
    TRACING_OFF,
    Tracing,
    continuing,
    current_traceparent,
    parent_context,
    setup_tracing,
    traces_endpoint,
)
from hades.workers.jobs import JobHandle
from tests.conftest import RunningHades, StartHades, eventually
from tests.support.receiver import receiving


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Tracing:
    return setup_tracing(Settings(), "hades-test", exporter)


async def traced_hades(start_hades: StartHades, tmp_path: Path, tracing: Tracing | None = None) -> RunningHades:
    return await start_hades(
        Roles(api=True, scheduler=True, executor=True),
        tracing=tracing,
        HADES_EXECUTOR="process",
        HADES_PROCESS_WORKSPACES=str(tmp_path),
    )


def job(*scripts: str) -> dict[str, Any]:
    steps = [{"id": i + 1, "name": f"s{i}", "image": f"img-{i}", "script": s} for i, s in enumerate(scripts)]
    return {"name": "traced", "steps": steps}


async def job_trace(tracing: Tracing, exporter: InMemorySpanExporter, job_id: str, spans: int) -> list[ReadableSpan]:
    """The finished spans of the job's trace (the one its submit span started), once there are ``spans``."""
    tracing.force_flush()
    finished = exporter.get_finished_spans()
    submits = [s for s in finished if s.name == "hades.submit" and s.attributes.get("hades.job_id") == job_id]
    if not submits or submits[0].context is None:
        return []
    trace_id = submits[0].context.trace_id
    mine = [s for s in finished if s.context is not None and s.context.trace_id == trace_id]
    return mine if len(mine) >= spans else []


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def traceparent_of(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-{span.context.trace_flags:02x}"


async def test_a_job_is_one_trace_from_submit_to_each_step(
    start_hades: StartHades,
    tmp_path: Path,
    tracing: Tracing,
    exporter: InMemorySpanExporter,
    event_store: NatsEventStore,
) -> None:
    hades = await traced_hades(start_hades, tmp_path, tracing)
    job_id = await hades.submit(job("true", "echo hi"))
    assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"

    spans: list[ReadableSpan] = await eventually(lambda: job_trace(tracing, exporter, job_id, 5), timeout=10)

    assert sorted(s.name for s in spans) == [
        "hades.attempt",
        "hades.schedule",
        "hades.step",
        "hades.step",
        "hades.submit",
    ]
    by_name = {s.name: s for s in spans}
    submit, schedule, attempt = by_name["hades.submit"], by_name["hades.schedule"], by_name["hades.attempt"]
    steps = sorted((s for s in spans if s.name == "hades.step"), key=lambda s: s.attributes["hades.step.index"])
    assert submit.parent is None
    assert parent_id(schedule) == span_id(submit)
    assert parent_id(attempt) == span_id(schedule)
    assert [parent_id(s) for s in steps] == [span_id(attempt)] * 2
    every = exporter.get_finished_spans()
    assert {s.context.trace_id for s in every if s.attributes.get("hades.job_id") == job_id and s.context} == {
        submit.context.trace_id if submit.context else 0
    }
    assert dict(attempt.attributes or {}) == {
        "hades.job_id": job_id,
        "hades.attempt": 1,
        "hades.executor_id": hades.settings.executor_id,
        "hades.status": "Succeeded",
    }
    assert [(s.attributes["hades.step.id"], s.attributes["hades.step.image"]) for s in steps] == [
        (1, "img-0"),
        (2, "img-1"),
    ]
    assert [s.attributes["hades.step.exit_code"] for s in steps] == [0, 0]
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert {s.resource.attributes["service.name"] for s in spans} == {"hades-test"}
    # The events carry the context of the span that appended them: that is how the next role found its parent.
    history = {(r.event.type, getattr(r.event, "step_index", None)): r.trace for r in await event_store.history(job_id)}
    assert history[("submitted", None)] == traceparent_of(submit)
    assert history[("queued", None)] == traceparent_of(schedule)
    assert history[("step_started", 0)] == traceparent_of(steps[0])
    assert history[("succeeded", None)] == traceparent_of(steps[1])  # batched with the last step_finished


async def test_a_failing_step_marks_its_span_and_the_attempt_as_errors(
    start_hades: StartHades, tmp_path: Path, tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    hades = await traced_hades(start_hades, tmp_path, tracing)
    job_id = await hades.submit(job("exit 3", "true"))
    assert (await hades.wait_terminal(job_id))["status"] == "Failed"

    spans: list[ReadableSpan] = await eventually(lambda: job_trace(tracing, exporter, job_id, 4), timeout=10)

    assert sorted(s.name for s in spans) == ["hades.attempt", "hades.schedule", "hades.step", "hades.submit"]
    step = next(s for s in spans if s.name == "hades.step")
    attempt = next(s for s in spans if s.name == "hades.attempt")
    assert step.attributes is not None and step.attributes["hades.step.exit_code"] == 3
    assert (step.status.status_code, step.status.description) == (StatusCode.ERROR, "exited with status 3")
    assert attempt.attributes is not None and attempt.attributes["hades.status"] == "Failed"
    assert attempt.status.status_code is StatusCode.ERROR
    assert "status 3" in (attempt.status.description or "")


async def test_with_tracing_off_no_event_carries_a_header_and_the_tracer_is_the_no_op_one(
    no_otel_env: None, start_hades: StartHades, tmp_path: Path, nc: Client
) -> None:
    off = setup_tracing(Settings(), "hades-up")
    assert off is TRACING_OFF and not off.enabled
    assert isinstance(off.tracer, trace.NoOpTracer)
    hades = await traced_hades(start_hades, tmp_path)  # tracing from the settings, as `hades up` does
    job_id = await hades.submit(job("true"))
    assert (await hades.wait_terminal(job_id))["status"] == "Succeeded"

    headers = []
    seq = 1
    js = nc.jetstream()
    while True:
        try:
            raw = await js.get_msg(EVENTS_STREAM, seq=seq, subject=job_events(job_id), next=True, direct=True)
        except NotFoundError:
            break
        assert raw.seq is not None
        headers.append(dict(raw.headers or {}))
        seq = raw.seq + 1

    assert len(headers) >= 5  # submitted, queued, started, prepared, step_started, ...
    assert all("Nats-Msg-Id" in h and "traceparent" not in h for h in headers), headers
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # nothing was installed process-wide


def test_the_endpoint_turns_tracing_on_with_the_role_as_service_name(no_otel_env: None) -> None:
    assert traces_endpoint(Settings()) is None
    base = Settings(OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318/")
    assert traces_endpoint(base) == "http://collector:4318/v1/traces"
    exact = Settings(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://b/t")
    assert traces_endpoint(exact) == "http://b/t"
    assert Roles(executor=True).service() == "hades-executor" and Roles.all().service() == "hades-up"


def test_a_traceparent_round_trips_into_a_parent_context() -> None:
    tracer = TracerProvider().get_tracer("test")
    assert current_traceparent() is None
    with tracer.start_as_current_span("outer") as outer:
        carried = current_traceparent()
    with tracer.start_as_current_span("inner", parent_context(carried)) as inner:
        pass
    assert carried is not None and inner.parent is not None
    assert (inner.parent.trace_id, inner.parent.span_id) == (
        outer.get_span_context().trace_id,
        outer.get_span_context().span_id,
    )
    with tracer.start_as_current_span("root", parent_context(None)) as root:
        pass
    assert root.parent is None  # no traceparent: a trace of its own, whatever is current


async def test_spans_reach_an_otlp_http_collector(no_otel_env: None) -> None:
    async with receiving(200) as collector:
        tracing = setup_tracing(Settings(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url), "hades-scheduler")
        assert tracing.enabled
        job_id = str(uuid.uuid4())
        with tracing.tracer.start_as_current_span("hades.schedule", attributes={"hades.job_id": job_id}):
            pass
        await tracing.shutdown()  # flushes the batch

        posts = collector.for_path("/v1/traces")
        assert len(posts) == 1 and posts[0].headers["content-type"] == "application/x-protobuf"
        sent = ExportTraceServiceRequest.FromString(posts[0].body)
        resource = sent.resource_spans[0]
        service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
        names = [span.name for scope in resource.scope_spans for span in scope.spans]
        assert (service, names) == ("hades-scheduler", ["hades.schedule"])


async def test_a_promoted_job_stays_in_its_trace(
    start_hades: StartHades, tracing: Tracing, exporter: InMemorySpanExporter, event_store: NatsEventStore
) -> None:
    hades = await start_hades(
        Roles(api=True, scheduler=True), tracing=tracing, PRIORITY_AGING_SECONDS=0.2, HADES_WATCHDOG_SECONDS=0.1
    )
    job_id = await hades.submit({**job("true"), "priority": 1})  # low, and no executor: the watchdog promotes it

    async def promoted() -> list[str | None]:
        queued = [r for r in await event_store.history(job_id) if r.event.type == "queued"]
        return [r.trace for r in queued] if len(queued) == 3 else []  # low, then medium, then high

    traces = await eventually(promoted, timeout=10)
    assert (await hades.client.post(f"/jobs/{job_id}/cancel")).status_code == 202  # leave no work behind

    spans = await eventually(lambda: job_trace(tracing, exporter, job_id, 2), timeout=10)  # submit and schedule
    trace_id = f"{spans[0].context.trace_id:032x}" if spans[0].context else ""
    assert all(t is not None and t.split("-")[1] == trace_id for t in traces), traces


def test_continuing_makes_a_stored_context_current_for_the_block_only() -> None:
    carried = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with continuing(carried):
        assert current_traceparent() == carried
    assert current_traceparent() is None
    with continuing(None):
        assert current_traceparent() is None


async def test_a_scheduler_with_tracing_off_hands_the_submits_trace_on_to_its_queued_event(
    no_otel_env: None, start_hades: StartHades, event_store: NatsEventStore
) -> None:
    """An API that traces in front of a scheduler that does not: the job's trace still reaches the executor."""
    await start_hades(Roles(scheduler=True))  # tracing from the settings: off
    carried = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    job_id = str(uuid.uuid4())
    spec = JobSpec(name="traced", steps=(Step(id=1, image="busybox"),))
    with continuing(carried):  # as a tracing API appends it
        await event_store.append(job_id, decide(None, SubmitJob(job_id=job_id, spec=spec), datetime.now(UTC)), 0)

    async def queued() -> list[str | None]:
        return [r.trace for r in await event_store.history(job_id) if r.event.type == "queued"]

    assert await eventually(queued, timeout=10) == [carried]
    job = await JobHandle.load(event_store, SystemClock(), job_id)
    await job.run(job_id, RequestCancel(by="tester"))  # leave no work behind
