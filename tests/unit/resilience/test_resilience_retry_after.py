"""The one Retry-After reader the webhook and the catalog share: seconds or any HTTP-date form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.resilience import RETRY_AFTER_LIMIT, RetryAfter, parse_retry_after, retry_after_delay

NOW = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("0", timedelta(0)),
        ("120", 120 * S),
        (" 7 ", 7 * S),
        ("3600", 3600 * S),
        ("86400", RETRY_AFTER_LIMIT),
        ("86401", RETRY_AFTER_LIMIT),
        ("9" * 60, RETRY_AFTER_LIMIT),
        ("Wed, 21 Oct 2026 07:28:00 GMT", datetime(2026, 10, 21, 7, 28, tzinfo=UTC)),
        ("Wednesday, 21-Oct-26 07:28:00 GMT", datetime(2026, 10, 21, 7, 28, tzinfo=UTC)),
        ("Wed Oct 21 07:28:00 2026", datetime(2026, 10, 21, 7, 28, tzinfo=UTC)),
        ("Wed Oct  1 07:28:00 2026", datetime(2026, 10, 1, 7, 28, tzinfo=UTC)),
        ("Wednesday, 21-Oct-69 07:28:00 GMT", datetime(2069, 10, 21, 7, 28, tzinfo=UTC)),
        ("Wednesday, 21-Oct-70 07:28:00 GMT", datetime(1970, 10, 21, 7, 28, tzinfo=UTC)),
        ("Wed, 21 Oct 2026 09:28:00 +0200", None),
        ("Wed, 21 Oct 2026 07:28:00 UTC", None),
        ("Thu, 29 Feb 2026 07:28:00 GMT", None),
        ("Wed, 99 Oct 2026 07:28:00 GMT", None),
        ("Thu, 01 Foo 2026 12:00:30 GMT", None),
        ("Thu, 01 Jan 2026 12:00 GMT", None),
        ("Thu, 01 Jan 2026 12:00:3x GMT", None),
        ("Thu 01 Jan 2026 12:00:30 GMT", None),
        (None, None),
        ("", None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("٣", None),
        ("9" * 65, None),
        ("9" * 5000, None),
    ],
)
def test_a_header_reads_as_seconds_or_an_http_date(
    header: str | None, parsed: RetryAfter | None
) -> None:
    """Delta-seconds (at most a day) or one of the three HTTP-date forms in UTC; junk is absent."""
    result = parse_retry_after(header)
    assert result == parsed
    if isinstance(parsed, datetime):
        assert isinstance(result, datetime)
        assert result.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("retry_after", "cap", "delay"),
    [
        (30 * S, timedelta(minutes=15), 30 * S),
        (NOW + 90 * S, timedelta(minutes=15), 90 * S),
        (NOW - 90 * S, timedelta(minutes=15), timedelta(0)),
        (NOW + timedelta(hours=3), timedelta(minutes=15), timedelta(minutes=15)),
        (NOW + timedelta(hours=3), timedelta(hours=1), timedelta(hours=1)),
        (RETRY_AFTER_LIMIT, timedelta(hours=1), timedelta(hours=1)),
    ],
)
def test_a_wait_is_kept_between_zero_and_the_callers_cap(
    retry_after: RetryAfter, cap: timedelta, delay: timedelta
) -> None:
    """A past date means now; a wait past the caller's cap is cut to it."""
    assert retry_after_delay(retry_after, NOW, cap=cap) == delay


def test_a_date_counts_from_an_aware_now_in_any_zone() -> None:
    """The same instant in another zone gives the same wait; a naive now is refused."""
    elsewhere = NOW.astimezone(timezone(timedelta(hours=2)))
    assert retry_after_delay(NOW + 5 * S, elsewhere, cap=timedelta(hours=1)) == 5 * S
    with pytest.raises(ValueError, match="now"):
        retry_after_delay(5 * S, datetime(2026, 1, 1), cap=S)  # naive on purpose


@given(st.text(max_size=80))
def test_any_text_parses_to_a_bounded_value_or_nothing(text: str) -> None:
    """Property: whatever a server sends, the reader returns nothing, a wait within a day, or
    a UTC instant — it never raises."""
    result = parse_retry_after(text)
    if isinstance(result, timedelta):
        assert timedelta(0) <= result <= RETRY_AFTER_LIMIT
    elif result is not None:
        assert result.utcoffset() == timedelta(0)
