"""``GET /metrics``: Prometheus exposition, rendered at scrape time from the read models (no second bookkeeping).

Families: ``hades_jobs_total{status}`` (jobs that reached each terminal status), ``hades_jobs{status}`` (jobs now
in each status), ``hades_queue_depth{priority}``, ``hades_views_sequence`` (how far the views have folded the log),
and histograms ``hades_phase_seconds{phase}``, ``hades_job_overhead_seconds`` and ``hades_job_duration_seconds`` of
finished jobs. Label values come from fixed sets (statuses, priorities, phase names), so the series count stays
bounded. The process's own families (``hades.metrics``: append latency, executor slots and attempts) follow them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from hades.http.services import ApiServices
from hades.http.wire.answers import text_answer
from hades.projections.distributions import Distribution
from hades.projections.views import ReadModels

TERMINAL = ("Succeeded", "Failed", "Stopped")


class ReadModelCollector:
    """A prometheus-client collector over one process's read models."""

    def __init__(self, views: ReadModels) -> None:
        self._views = views

    def collect(self) -> Iterator[Metric]:
        """The families, as of now."""
        snapshot = self._views.metrics.snapshot(datetime.now(UTC))
        counts: dict[str, int] = snapshot["statusCounts"]
        finished = GaugeMetricFamily("hades_jobs_total", "Jobs that reached each terminal status.", labels=["status"])
        current = GaugeMetricFamily("hades_jobs", "Jobs now in each status.", labels=["status"])
        for status in ("Queued", "Running", *TERMINAL):
            current.add_metric([status], counts.get(status, 0))
            if status in TERMINAL:
                finished.add_metric([status], counts.get(status, 0))
        depth = GaugeMetricFamily("hades_queue_depth", "Jobs waiting, per priority.", labels=["priority"])
        for priority, waiting in snapshot["queueDepth"]["byPriority"].items():
            depth.add_metric([priority], waiting)
        folded = GaugeMetricFamily(
            "hades_views_sequence",
            "The last event-log sequence folded into this process's views (behind the stream's last: the lag).",
        )
        folded.add_metric([], self._views.jobs.last_seq)
        yield from (finished, current, depth, folded)
        distributions = self._views.distributions
        phases = HistogramMetricFamily("hades_phase_seconds", "Time finished jobs spent per phase.", labels=["phase"])
        for phase, distribution in sorted(distributions.phases.items()):
            phases.add_metric([phase], distribution.cumulative(), distribution.total)
        yield phases
        yield _histogram(
            "hades_job_overhead_seconds", "Finished jobs' time not spent running steps.", distributions.overhead
        )
        yield _histogram(
            "hades_job_duration_seconds", "Finished jobs' time from submission to end.", distributions.duration
        )


def _histogram(name: str, documentation: str, distribution: Distribution) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation)
    family.add_metric([], distribution.cumulative(), distribution.total)
    return family


@get("/metrics", sync_to_thread=False, responses={200: text_answer("Prometheus exposition", CONTENT_TYPE_LATEST)})
def metrics(request: Request[Any, Any, State]) -> Response[bytes]:
    """The exposition text, open like ``/ping`` (aggregates only: no job ids, names or secrets)."""
    services: ApiServices = request.app.state.services
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReadModelCollector(services.views))
    if services.registry is not None:
        registry.register(services.registry)
    return Response(content=generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
