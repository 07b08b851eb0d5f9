"""What one outbound attempt's failure means: the error classes and their traits, as one table.

Every adapter that talks to an outbound dependency (the AMQP connect, the webhook send, the model
catalog fetch) turns its foreign outcome into an :class:`ErrorClass` at its boundary, once; the
breaker, the health record and the failover sweep read only the traits in :data:`TRAITS`.

The mapping an adapter applies (the pure half is :func:`classify_status`)::

    connection refused, DNS failure            -> REFUSED
    connection reset or closed mid-exchange    -> RESET
    connect, read or watchdog deadline         -> TIMEOUT
    HTTP 2xx                                   -> success (no error class)
    HTTP 401, 403                              -> AUTH
    HTTP 410                                   -> GONE
    HTTP 429 (with or without Retry-After)     -> THROTTLED
    HTTP 503, 529 with a usable Retry-After    -> THROTTLED
    any other HTTP 5xx                         -> SERVER_ERROR
    any other status (1xx, 3xx, 4xx)           -> REJECTED
    a body that cannot be read as expected     -> MALFORMED
    a body larger than the adapter reads       -> TOO_LARGE
    the breaker refused the endpoint (no dial) -> CIRCUIT_OPEN

Three traits decide everything downstream:

* ``failover`` — another endpoint may serve the same request: try the next one. Auth, request
  and body errors are the same on every endpoint, so they end the call instead (RFC 0018 §3.3).
* ``strike`` — evidence the endpoint is down: it counts toward opening the breaker. Only blind
  failures strike. A throttle is the server speaking ("try again later", Vak 15): it fails over
  but never strikes, so a rate-limit window cannot open a breaker it would release seconds later.
* ``answered`` — the endpoint produced a response at all (its health record's reachability).

``GONE`` is the endpoint saying it is retired for good (Standard Webhooks: a 410 disables the
endpoint): another endpoint may serve, so it fails over, but it is an answer, not a strike. What
"retired" means for later calls is the caller's (the webhook receivers disable it until an
operator acts; a catalog probe simply failed).

Codes only: an error class is a bounded label, never text from the peer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import NamedTuple

__all__ = ["TRAITS", "ErrorClass", "Outcome", "Traits", "classify_status"]


class ErrorClass(StrEnum):
    REFUSED = "refused"
    RESET = "reset"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server_error"
    THROTTLED = "throttled"
    CIRCUIT_OPEN = "circuit_open"
    AUTH = "auth"
    GONE = "gone"
    REJECTED = "rejected"
    MALFORMED = "malformed"
    TOO_LARGE = "too_large"


class Traits(NamedTuple):
    failover: bool  # try the next endpoint
    strike: bool  # counts toward opening the breaker
    answered: bool  # the endpoint responded (reachable)
    dialed: bool  # an attempt reached the network at all


E = ErrorClass

#: error class -> (failover, strike, answered, dialed). The one place these meanings live.
TRAITS: dict[ErrorClass, Traits] = {
    E.REFUSED: Traits(failover=True, strike=True, answered=False, dialed=True),
    E.RESET: Traits(failover=True, strike=True, answered=False, dialed=True),
    E.TIMEOUT: Traits(failover=True, strike=True, answered=False, dialed=True),
    E.SERVER_ERROR: Traits(failover=True, strike=True, answered=True, dialed=True),
    E.THROTTLED: Traits(failover=True, strike=False, answered=True, dialed=True),
    E.CIRCUIT_OPEN: Traits(failover=True, strike=False, answered=False, dialed=False),
    E.AUTH: Traits(failover=False, strike=False, answered=True, dialed=True),
    E.GONE: Traits(failover=True, strike=False, answered=True, dialed=True),
    E.REJECTED: Traits(failover=False, strike=False, answered=True, dialed=True),
    E.MALFORMED: Traits(failover=False, strike=False, answered=True, dialed=True),
    E.TOO_LARGE: Traits(failover=False, strike=False, answered=True, dialed=True),
}

_OVERLOAD = frozenset({503, 529})


def classify_status(status: int, *, retry_after: bool = False) -> ErrorClass | None:
    """The class of an HTTP status (``None`` for 2xx); ``retry_after``: a usable header came too."""
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return E.AUTH
    if status == 410:
        return E.GONE
    if status == 429 or (status in _OVERLOAD and retry_after):
        return E.THROTTLED
    if 500 <= status < 600:
        return E.SERVER_ERROR
    return E.REJECTED


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one attempt ended: success (``error`` is ``None``) or an error class.

    ``latency`` is the attempt's duration (it feeds the EWMA on success); ``retry_after`` is the
    server's advice on a throttle, already parsed (see :func:`fleetd.resilience.parse_retry_after`).
    """

    error: ErrorClass | None = None
    latency: timedelta | None = None
    retry_after: timedelta | None = None

    def __post_init__(self) -> None:
        if self.latency is not None and self.latency < timedelta(0):
            raise ValueError("Outcome.latency must not be negative")
        if self.retry_after is not None and self.error is not E.THROTTLED:
            raise ValueError("only a throttle carries retry_after")

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def traits(self) -> Traits | None:
        return None if self.error is None else TRAITS[self.error]
