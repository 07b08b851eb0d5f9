"""Reading a ``Retry-After`` header: the one parser every outbound HTTP call uses.

A server that throttles (429, or 503/529 with the header) says when to come back, as
delta-seconds (``120``) or as an HTTP-date in any of the three forms RFC 9110 §5.6.7 asks a
recipient to accept (``Sun, 06 Nov 1994 08:49:37 GMT``, the obsolete RFC 850 form
``Sunday, 06-Nov-94 08:49:37 GMT``, and asctime's ``Sun Nov  6 08:49:37 1994``).

* :func:`parse_retry_after` reads the header into a :data:`RetryAfter` — a wait or an instant —
  or ``None`` when it is absent, overlong or unreadable (the caller's backoff then decides).
  Delta-seconds beyond :data:`RETRY_AFTER_LIMIT` read as the limit, so a huge number costs
  nothing; a date is kept as it is, in UTC.
* :func:`retry_after_delay` turns it into a wait from ``now`` within ``[0, cap]``: a date already
  past means "now", and each caller passes its own cap (15 minutes for the webhook, an hour for
  the model catalog).

What a wait *means* stays with the caller: the webhook never waits less than its jittered
backoff (:func:`fleetd.notify.core.retry.next_step`), and the catalog probe never probes before its
floor. Pure: standard library only (its own HTTP-date reader: ``email.utils`` would import
``random`` and ``socket``), no clock, no I/O.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["RETRY_AFTER_LIMIT", "RetryAfter", "parse_retry_after", "retry_after_delay"]

RetryAfter = timedelta | datetime
"""A parsed ``Retry-After``: a wait (delta-seconds) or an instant (HTTP-date, UTC-aware)."""

RETRY_AFTER_LIMIT: Final = timedelta(days=1)
"""The longest wait delta-seconds are read as; every caller caps lower still."""

_MAX_CHARS: Final = 64
_LIMIT_SECONDS: Final = int(RETRY_AFTER_LIMIT.total_seconds())
_DELTA_SECONDS: Final = re.compile(r"[0-9]+")
_MONTHS: Final = (
    *("Jan", "Feb", "Mar", "Apr", "May", "Jun"),
    *("Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
)
_MONTH = "(?P<month>" + "|".join(_MONTHS) + ")"
_CLOCK = r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
_HTTP_DATES: Final = (
    # IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
    re.compile(rf"[A-Z][a-z]{{2}}, (?P<day>[0-9]{{2}}) {_MONTH} (?P<year>[0-9]{{4}}) {_CLOCK} GMT"),
    # obsolete RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
    re.compile(rf"[A-Z][a-z]{{5,8}}, (?P<day>[0-9]{{2}})-{_MONTH}-(?P<yy>[0-9]{{2}}) {_CLOCK} GMT"),
    # obsolete asctime: Sun Nov  6 08:49:37 1994
    re.compile(rf"[A-Z][a-z]{{2}} {_MONTH} (?P<day>[ 0-9][0-9]) {_CLOCK} (?P<year>[0-9]{{4}})"),
)


def parse_retry_after(value: str | None) -> RetryAfter | None:
    """A ``Retry-After`` header read as delta-seconds (at most :data:`RETRY_AFTER_LIMIT`) or as
    an HTTP-date (UTC-aware); ``None`` when absent, overlong or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > _MAX_CHARS:
        return None
    if _DELTA_SECONDS.fullmatch(text):
        return timedelta(seconds=min(int(text), _LIMIT_SECONDS))
    return _http_date(text)


def retry_after_delay(retry_after: RetryAfter, now: datetime, *, cap: timedelta) -> timedelta:
    """The wait ``retry_after`` asks for at ``now`` (UTC-aware), within ``[0, cap]``."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    wait = retry_after - now if isinstance(retry_after, datetime) else retry_after
    return max(timedelta(0), min(cap, wait))


def _http_date(text: str) -> datetime | None:
    """One of the three HTTP-date forms, always UTC; ``None`` otherwise."""
    for form in _HTTP_DATES:
        found = form.fullmatch(text)
        if found is None:
            continue
        parts = found.groupdict()
        year = int(parts["year"]) if parts.get("year") else 1900 + int(parts["yy"])
        if year < 1970:  # two-digit years: 70-99 are 19xx, 00-69 are 20xx (as strptime's %y)
            year += 100
        try:
            return datetime(
                year,
                _MONTHS.index(parts["month"]) + 1,
                int(parts["day"]),
                int(parts["hour"]),
                int(parts["minute"]),
                int(parts["second"]),
                tzinfo=UTC,
            )
        except ValueError:  # 31 Feb, hour 25
            return None
    return None
