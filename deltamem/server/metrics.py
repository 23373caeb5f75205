"""The service's metrics, served at ``GET /metrics`` in Prometheus' text format
(prometheus-client; OpenMetrics for a scraper that asks for it), behind the API's
keys like every route under /v1.

* ``deltamem_jobs{state}``: the queue, read from the session log at each scrape
  (shared by every worker process): ``pending`` (waiting), ``running`` (in this
  server's worker's hands), ``deferred`` (sent with infer=false), ``failed``
  (parked), ``applied``;
* ``deltamem_job_seconds{outcome}``: histogram of a job's turn in this process's
  worker, tries and backoff included (``applied``, ``already_applied``,
  ``not_applied``: parked as failed, gone, or left at a stop);
* ``deltamem_llm_call_seconds{purpose,outcome}``: histogram of model calls (``ok``,
  ``error``) made in this process;
* ``deltamem_llm_tokens_total{purpose,kind}``: tokens of those calls (``prompt``,
  ``completion``, ``cached``);
* ``deltamem_operations_total{op}``: operations of the sessions applied here
  (add, update, none);
* ``deltamem_refusals_total{rule}``: operations the write rules turned into
  ``none`` (an operation's ``rule``, deltamem.rules), per session applied;
* ``deltamem_search_seconds{tiers}``: histogram of ``POST /v1/search``.

Each app has its own registry (two apps in one process do not mix their counts).
Workers in other processes (``deltamem worker``) count their own jobs and calls,
which this server does not see; the queue gauge covers them all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from deltamem.llm.base import CallRecord
from deltamem.memory import Memory
from deltamem.server.worker import SessionKey, Worker
from deltamem.store.users import users_of
from deltamem.types import AddResult

_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_JOB_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200)
_SEARCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class _Queue(Collector):
    """The queue's depth by state, read at each scrape."""

    def __init__(self, memory: Memory, worker: Worker) -> None:
        self.memory, self.worker = memory, worker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = users_of(self.memory.store).session_counts()
        counts["running"] = len(self.worker.in_hand())
        family = GaugeMetricFamily(
            "deltamem_jobs", "Sessions of the log (the job queue) by state.", labels=["state"]
        )
        for state in ("pending", "running", "deferred", "failed", "applied"):
            family.add_metric([state], counts.get(state, 0))
        yield family


class ServiceMetrics:
    def __init__(self, memory: Memory, worker: Worker) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Histogram(
            "deltamem_job_seconds",
            "A job's turn in this process's worker (tries and backoff included).",
            ["outcome"],
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.calls = Histogram(
            "deltamem_llm_call_seconds",
            "Model calls made in this process.",
            ["purpose", "outcome"],
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "deltamem_llm_tokens",
            "Tokens of the model calls made in this process.",
            ["purpose", "kind"],
            registry=r,
        )
        self.operations = Counter(
            "deltamem_operations",
            "Operations of the sessions applied in this process, by kind.",
            ["op"],
            registry=r,
        )
        self.refusals = Counter(
            "deltamem_refusals",
            "Operations a write rule turned into none, by the rule's code.",
            ["rule"],
            registry=r,
        )
        self.search = Histogram(
            "deltamem_search_seconds",
            "POST /v1/search, by the tiers searched.",
            ["tiers"],
            buckets=_SEARCH_BUCKETS,
            registry=r,
        )
        r.register(_Queue(memory, worker))
        memory.on_call(self.observe_call)
        worker.on_job(self.observe_job)

    def observe_call(self, rec: CallRecord) -> None:
        purpose = rec.purpose or "unknown"
        self.calls.labels(purpose, "ok" if rec.ok else "error").observe(max(0.0, rec.seconds))
        for kind, n in (
            ("prompt", rec.prompt_tokens),
            ("completion", rec.completion_tokens),
            ("cached", rec.cached_tokens),
        ):
            if n > 0:
                self.tokens.labels(purpose, kind).inc(n)

    def observe_job(self, key: SessionKey, result: AddResult | None, seconds: float) -> None:
        if result is None:
            outcome = "not_applied"
        elif result.already_applied:
            outcome = "already_applied"
        else:
            outcome = "applied"
            for op in result.operations:
                self.operations.labels(op.op).inc()
                if op.op == "none" and op.rule:
                    self.refusals.labels(op.rule).inc()
        self.jobs.labels(outcome).observe(seconds)

    @contextmanager
    def timed_search(self, tiers: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.search.labels(tiers).observe(time.perf_counter() - started)

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics and their media type, in the format the scraper's Accept
        header asks for: Prometheus' text format (0.0.4) unless it asks for
        OpenMetrics."""
        encode, media_type = choose_encoder(accept or "")
        return encode(self.registry), media_type
