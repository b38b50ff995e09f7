"""One OpenTelemetry trace per job: ``hades.submit`` (API) → ``hades.schedule`` (scheduler) → ``hades.attempt``
(executor) → ``hades.step`` per step, the context carried from process to process in the events' ``traceparent``
header (W3C trace context).

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set: then there is no SDK
provider, the tracer is the API's no-op one, and no event carries a header. On, each process builds its own
TracerProvider (a BatchSpanProcessor into the OTLP/HTTP exporter, ``service.name`` ``hades-<role>``) and hands its
tracer to the roles; the global provider is never set, so several Hades in one process (tests) stay apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hades.config import Settings

if TYPE_CHECKING:  # the SDK is imported only when tracing is on
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(frozen=True)
class Tracing:
    """The tracer the roles of one process use, and the provider behind it (None when tracing is off)."""

    tracer: trace.Tracer
    provider: TracerProvider | None = None

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded and exported."""
        return self.provider is not None

    def force_flush(self) -> bool:
        """Export what is buffered now (blocking); True when it all went."""
        return self.provider.force_flush() if self.provider is not None else True

    async def shutdown(self) -> None:
        """Flush and stop the exporter (in a thread: an unreachable collector must not block the loop)."""
        if self.provider is not None:
            await asyncio.to_thread(self.provider.shutdown)


TRACING_OFF = Tracing(trace.NoOpTracer())


def traces_endpoint(settings: Settings) -> str | None:
    """Where spans go: the traces endpoint as given, or ``<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces``."""
    if settings.otel_traces_endpoint:
        return settings.otel_traces_endpoint
    if settings.otel_endpoint:
        return settings.otel_endpoint.rstrip("/") + "/v1/traces"
    return None


def setup_tracing(settings: Settings, service: str, exporter: SpanExporter | None = None) -> Tracing:
    """The process's tracing: off without an endpoint (and no ``exporter``), else batched into the exporter."""
    if exporter is None:
        endpoint = traces_endpoint(settings)
        if endpoint is None:
            return TRACING_OFF
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint)
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider.get_tracer("hades"), provider)


def current_traceparent() -> str | None:
    """The ``traceparent`` of the span current in this task, None when there is none (tracing off)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def parent_context(traceparent: str | None) -> Context:
    """The context a stored event's ``traceparent`` names, as the parent of a new span (empty: a new trace)."""
    if not traceparent:
        return Context()
    return _PROPAGATOR.extract({TRACEPARENT: traceparent}, Context())


@contextmanager
def continuing(traceparent: str | None) -> Iterator[None]:
    """Make a stored event's context current, without a span of its own, so what is appended meanwhile carries
    the job's trace on (the watchdog's requeues and promotions, which have no span)."""
    if not traceparent:
        yield
        return
    token = context.attach(parent_context(traceparent))
    try:
        yield
    finally:
        context.detach(token)
