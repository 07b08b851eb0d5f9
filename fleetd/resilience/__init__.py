"""Outbound resilience: pure breakers, endpoint health, failover, and model health.

Every outbound dependency (the AMQP connect, the webhook send, the model catalog fetch) wraps its
one chokepoint in these state machines (RFC 0018; Vak 15 Reliability; Model health):

* :mod:`~fleetd.resilience.classify` — what a failure means (fail over? strike the breaker?);
* :mod:`~fleetd.resilience.breaker` — closed → open → half-open, exactly one probe at a time;
* :mod:`~fleetd.resilience.endpoint` — reachability, EWMA latency, rolling error rate, last error;
* :mod:`~fleetd.resilience.failover` — ordered endpoints with sticky primary, one bounded sweep;
* :mod:`~fleetd.resilience.budget` — the failover budget of one call, capped doubling;
* :mod:`~fleetd.resilience.retry_after` — the one ``Retry-After`` reader (seconds or HTTP-date);
* :mod:`~fleetd.resilience.standing` — where each endpoint stands and why, for the surfaces;
* :mod:`~fleetd.resilience.catalog` and :mod:`~fleetd.resilience.models` — the fail-open model
  catalog probe: its schedule, its verdict, benching, and the stated context window.

Nothing here does I/O, reads a clock, sleeps, logs or draws a random number: time comes in as
``now`` (a UTC-aware datetime; a monotonic source mapped to one is best), jitter as a draw in
[0, 1], and every state is a frozen value returned anew. The package imports only the standard
library, :mod:`fleetd.errors` and itself.
"""

from __future__ import annotations

from fleetd.resilience.breaker import (
    Breaker,
    BreakerEvent,
    BreakerPolicy,
    BreakerState,
    Permit,
)
from fleetd.resilience.budget import FailoverBudget
from fleetd.resilience.catalog import (
    Catalog,
    CatalogEntry,
    context_window_for,
    parse_catalog,
    stated_context_window,
)
from fleetd.resilience.classify import TRAITS, ErrorClass, Outcome, Traits, classify_status
from fleetd.resilience.endpoint import EndpointHealth, HealthPolicy
from fleetd.resilience.failover import (
    Endpoint,
    GiveUp,
    GiveUpReason,
    Pick,
    Pool,
    Settled,
    Sweep,
    next_attempt,
    settle,
)
from fleetd.resilience.models import (
    PROBE_FLOOR,
    Availability,
    Bench,
    BenchPolicy,
    CatalogFetch,
    ModelVerdict,
    ProbeSchedule,
    VerdictReason,
    judge,
)
from fleetd.resilience.retry_after import (
    RETRY_AFTER_LIMIT,
    RetryAfter,
    parse_retry_after,
    retry_after_delay,
)
from fleetd.resilience.standing import Standing, standing

__all__ = [
    "PROBE_FLOOR",
    "RETRY_AFTER_LIMIT",
    "TRAITS",
    "Availability",
    "Bench",
    "BenchPolicy",
    "Breaker",
    "BreakerEvent",
    "BreakerPolicy",
    "BreakerState",
    "Catalog",
    "CatalogEntry",
    "CatalogFetch",
    "Endpoint",
    "EndpointHealth",
    "ErrorClass",
    "FailoverBudget",
    "GiveUp",
    "GiveUpReason",
    "HealthPolicy",
    "ModelVerdict",
    "Outcome",
    "Permit",
    "Pick",
    "Pool",
    "ProbeSchedule",
    "RetryAfter",
    "Settled",
    "Standing",
    "Sweep",
    "Traits",
    "VerdictReason",
    "classify_status",
    "context_window_for",
    "judge",
    "next_attempt",
    "parse_catalog",
    "parse_retry_after",
    "retry_after_delay",
    "settle",
    "standing",
    "stated_context_window",
]
