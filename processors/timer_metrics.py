"""The timer service's metric families (``TimerMetrics``), each bound to the namespace."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.topics.consumer_lag import LagSampler, lag_gauge

__all__ = ["TimerMetrics"]


class TimerMetrics:
    """The timer service's families; every one carries ``namespace``, bound here."""

    def __init__(self, registry: CollectorRegistry, namespace: str) -> None:
        r, ns = registry, ["namespace"]
        self.fired = Counter(
            "kadence_timers_fired", "timers fired (FireTimer commands produced)", ns, registry=r
        ).labels(namespace)
        self.reenqueued = Counter(
            "kadence_timers_reenqueued", "timer records moved to a finer tier", ns, registry=r
        ).labels(namespace)
        self.dead = Counter(
            "kadence_timers_dead_letters", "timer records sent to the dead-letter topic", ns, registry=r
        ).labels(namespace)
        self.retries = Counter(
            "kadence_timers_produce_retries", "outputs produced again after a delivery error", ns, registry=r
        ).labels(namespace)
        self.lateness = Histogram(
            "kadence_timers_lateness_seconds",
            "fire time minus due time",
            ns,
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
        ).labels(namespace)
        held = Gauge("kadence_timers_held_records", "timer records held in memory", ["namespace", "where"], registry=r)
        self.held_near = held.labels(namespace, "near")
        self.held_heads = held.labels(namespace, "head")
        self.in_flight = Gauge(
            "kadence_timers_in_flight", "outputs produced and not yet acknowledged", ns, registry=r
        ).labels(namespace)
        self.lag = LagSampler(lag_gauge(r), namespace, "timers")
