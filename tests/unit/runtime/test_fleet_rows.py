"""A kept row's ages are filled in as of each version's time, byte for byte as ``json.dumps``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetd.runtime.fleet_rows import OpenRow, encode, micros, open_row

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)

#: Ages back from NOW in microseconds: shared ones (members stepped by one tick) and odd ones
#: whose third decimal rounds either way.
_BACK = st.sampled_from([0, 1, 499, 500, 1_500, 2_345_678, 30_000_000]) | st.integers(0, 10**12)


def _row(name: str, backs: list[int]) -> tuple[dict[str, object], OpenRow]:
    """A row with one age per entry of ``backs`` and the same row built with its ages filled."""
    sinces = [NOW - timedelta(microseconds=back) for back in backs]
    fresh: dict[str, object] = {"name": name, "ages": [dict[str, object]() for _ in backs]}
    filled = json.loads(encode(fresh))
    slots = []
    for n, since in enumerate(sinces):
        fresh["ages"][n]["age"] = None  # type: ignore[index]
        filled["ages"][n]["age"] = round((NOW - since).total_seconds(), 3)
        slots.append((fresh["ages"][n], "age", since))  # type: ignore[index]
    return filled, open_row(fresh, slots)


@given(st.lists(st.tuples(st.text(max_size=8), st.lists(_BACK, max_size=4)), max_size=30))
def test_rendering_all_rows_at_once_gives_each_row_s_own_text(
    rows: list[tuple[str, list[int]]],
) -> None:
    """The rows rendered together (ages written once per distinct time) read exactly as each
    rendered on its own, and as the row encoded with its ages filled in."""
    built = [_row(name, backs) for name, backs in rows]
    now = micros(NOW)
    together = OpenRow.render_all([row for _, row in built], now)
    assert together == [row.render(now) for _, row in built]
    assert together == [encode(filled) for filled, _ in built]
