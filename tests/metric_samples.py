"""Read a Prometheus series the way ``/metrics`` shows it, through the collector's public API.

Tests assert counters and gauges through ``collect()``, the samples the registry renders into
the exposition, never through a metric child's private ``_value``. Reading one collector rather
than the whole registry keeps the read cheap inside a polling ``until``.
"""

from __future__ import annotations

from prometheus_client.registry import Collector


def sample(metric: Collector, **labels: str) -> float | None:
    """The exposed value of ``metric{labels}`` (a counter's ``_total``, a gauge's value), or None
    when no such series is exposed."""
    for family in metric.collect():
        for point in family.samples:
            if point.labels == labels and point.name in (family.name, f"{family.name}_total"):
                return point.value
    return None
