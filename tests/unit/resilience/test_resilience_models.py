"""Model health: the catalog read, the fail-open verdict, the probe floor and the bench."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.resilience import (
    PROBE_FLOOR,
    Availability,
    Bench,
    BenchPolicy,
    Catalog,
    CatalogEntry,
    CatalogFetch,
    ErrorClass,
    ModelVerdict,
    ProbeSchedule,
    VerdictReason,
    context_window_for,
    judge,
    parse_catalog,
    stated_context_window,
)
from fleetd.resilience.catalog import MAX_CONTEXT_WINDOW

T0 = datetime(2026, 1, 1, tzinfo=UTC)
A, R = Availability, VerdictReason
MINUTE = timedelta(minutes=1)

OPENROUTER_SAMPLE: dict[str, Any] = {
    "data": [
        {"id": "anthropic/claude-sonnet-4", "context_length": 200000},
        {"id": "openai/gpt-5", "top_provider": {"context_length": 400000}},
        {"id": "mistral/small", "max_context_length": 32768, "context_window": 1},
        {"id": "local/tiny", "context_window": 4096},
        {"id": "no/window", "object": "model"},
        {"id": "anthropic/claude-sonnet-4", "context_length": 1},
        {"object": "model"},
        "not-an-entry",
        {"id": 42},
        {"id": ""},
    ]
}


def test_a_catalog_lists_ids_with_their_stated_windows() -> None:
    """The OpenAI-compatible ``data`` list; junk entries skipped, the first of an id wins."""
    catalog = parse_catalog(OPENROUTER_SAMPLE)
    assert catalog is not None
    assert set(catalog.entries) == {
        "anthropic/claude-sonnet-4",
        "openai/gpt-5",
        "mistral/small",
        "local/tiny",
        "no/window",
    }
    assert catalog.context_window("anthropic/claude-sonnet-4") == 200000
    assert catalog.context_window("openai/gpt-5") == 400000
    assert catalog.context_window("mistral/small") == 32768
    assert catalog.context_window("local/tiny") == 4096
    assert catalog.context_window("no/window") is None
    assert catalog.context_window("absent") is None
    assert catalog.lists("openai/gpt-5")
    assert not catalog.lists("openai/gpt-4")


@pytest.mark.parametrize(
    ("document", "ids"),
    [
        ([{"id": "m"}], {"m"}),
        ({"data": []}, set()),
        ({"object": "list", "data": [{"id": "m"}]}, {"m"}),
    ],
)
def test_a_bare_list_or_an_empty_catalog_still_parses(document: object, ids: set[str]) -> None:
    """A bare list of models, an empty data list and an OpenAI-style list object all parse into a
    catalog with those model ids."""
    catalog = parse_catalog(document)
    assert catalog is not None
    assert set(catalog.entries) == ids


@pytest.mark.parametrize("document", [None, "models", 3, {"data": {"id": "m"}}, {"models": []}])
def test_a_document_that_is_not_a_catalog_is_none(document: object) -> None:
    """Documents that are not a model catalog (null, a string, a number, data not a list, no data
    key) parse to None."""
    assert parse_catalog(document) is None


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"context_length": 8192, "max_context_length": 1, "context_window": 2}, 8192),
        ({"max_context_length": 16384, "context_window": 2}, 16384),
        ({"context_window": 65536, "top_provider": {"context_length": 3}}, 65536),
        ({"top_provider": {"context_length": 131072}}, 131072),
        ({"context_length": "8192", "context_window": 4096}, 4096),
        ({"context_length": True, "context_window": 4096}, 4096),
        ({"context_length": 0, "max_context_length": -1, "context_window": 4096}, 4096),
        ({"context_length": 8192.0}, None),
        ({"context_length": MAX_CONTEXT_WINDOW + 1}, None),
        ({"context_length": MAX_CONTEXT_WINDOW}, MAX_CONTEXT_WINDOW),
        ({"top_provider": 5}, None),
        ({"top_provider": None, "context_length": None}, None),
        ({}, None),
    ],
)
def test_the_context_window_is_read_in_the_documented_order(
    entry: dict[str, object], expected: int | None
) -> None:
    """context_length, then max_context_length, context_window, top_provider.context_length."""
    assert stated_context_window(entry) == expected


def test_the_configured_window_stands_when_the_catalog_states_none() -> None:
    """Fail-open: an unreachable catalog or an entry without a window keeps the yaml value."""
    catalog = Catalog(
        entries={"m": CatalogEntry(id="m", context_window=100), "n": CatalogEntry(id="n")}
    )
    assert context_window_for("m", catalog, 50) == 100
    assert context_window_for("m", catalog, 500) == 100
    assert context_window_for("n", catalog, 500) == 500
    assert context_window_for("x", catalog, 500) == 500
    assert context_window_for("m", None, 500) == 500
    assert context_window_for("m", None, None) is None


LISTING = Catalog(entries={"m": CatalogEntry(id="m")})


@pytest.mark.parametrize(
    ("fetch", "covered", "verdict"),
    [
        (CatalogFetch(catalog=LISTING), True, ModelVerdict(A.AVAILABLE, R.LISTED)),
        (
            CatalogFetch(catalog=Catalog(entries={"other": CatalogEntry(id="other")})),
            True,
            ModelVerdict(A.UNAVAILABLE, R.OMITTED),
        ),
        (CatalogFetch(catalog=Catalog()), True, ModelVerdict(A.UNKNOWN, R.EMPTY_CATALOG)),
        *(
            (CatalogFetch(error=error), True, ModelVerdict(A.UNKNOWN, R.FETCH_FAILED))
            for error in ErrorClass
        ),
        (None, True, ModelVerdict(A.UNKNOWN, R.NOT_RUN)),
        (None, False, ModelVerdict(A.UNKNOWN, R.NOT_COVERED)),
        (CatalogFetch(catalog=Catalog()), False, ModelVerdict(A.UNKNOWN, R.NOT_COVERED)),
    ],
)
def test_only_a_fetched_catalog_that_omits_the_model_says_unavailable(
    fetch: CatalogFetch | None, covered: bool, verdict: ModelVerdict
) -> None:
    """Fail-open: every failure, an uncovered provider and a probe not yet run are UNKNOWN."""
    assert judge("m", fetch, covered=covered) == verdict


def test_a_fetch_has_a_catalog_or_an_error() -> None:
    """A CatalogFetch holds exactly one of a catalog and an error: neither or both is refused."""
    with pytest.raises(ValueError, match="either"):
        CatalogFetch()
    with pytest.raises(ValueError, match="either"):
        CatalogFetch(catalog=LISTING, error=ErrorClass.AUTH)


def test_one_probe_per_provider_per_five_minutes() -> None:
    """Counted from the probe's start; each provider has its own slot."""
    schedule = ProbeSchedule()
    schedule, first = schedule.claim("openrouter", T0)
    assert first
    assert schedule.due_at("openrouter") == T0 + 5 * MINUTE
    assert schedule.due_at("local") is None
    assert schedule.claim("openrouter", T0 + 4 * MINUTE) == (schedule, False)
    schedule, other = schedule.claim("local", T0 + MINUTE)
    assert other
    schedule, again = schedule.claim("openrouter", T0 + 5 * MINUTE)
    assert again


def test_a_configured_interval_below_the_floor_is_raised() -> None:
    """A probe interval below the floor is raised to the floor; one above it is kept."""
    assert ProbeSchedule(interval=MINUTE).floor == PROBE_FLOOR
    assert ProbeSchedule(interval=10 * MINUTE).floor == 10 * MINUTE


@settings(max_examples=300)
@given(
    interval=st.integers(min_value=0, max_value=900).map(lambda s: timedelta(seconds=s)),
    asks=st.lists(
        st.tuples(st.sampled_from(["p", "q", "r"]), st.integers(min_value=-60, max_value=400)),
        max_size=100,
    ),
)
def test_the_probe_never_runs_more_often_than_its_floor(
    interval: timedelta, asks: list[tuple[str, int]]
) -> None:
    """Any pattern of asks (the clock may even step back): granted probes are a floor apart."""
    schedule, now = ProbeSchedule(interval=interval), T0
    granted: dict[str, list[datetime]] = {}
    for provider, step in asks:
        now += timedelta(seconds=step)
        schedule, ok = schedule.claim(provider, now)
        if ok:
            granted.setdefault(provider, []).append(now)
    for times in granted.values():
        for earlier, later in itertools.pairwise(times):
            assert later - earlier >= PROBE_FLOOR


def test_an_unavailable_verdict_benches_with_an_escalating_capped_cooldown() -> None:
    """5, 10, 20, 40, 60, 60 minutes: each consecutive strike after the last bench expired."""
    bench, now, seen = Bench(), T0, []
    for _ in range(6):
        bench = bench.after(A.UNAVAILABLE, now, BenchPolicy())
        assert bench.benched(now)
        assert bench.until is not None
        seen.append((bench.until - now) / MINUTE)
        now = bench.until
        assert not bench.benched(now)
    assert seen == [5, 10, 20, 40, 60, 60]


def test_a_verdict_during_a_standing_bench_does_not_extend_it() -> None:
    """Another unavailable or an unknown verdict while a bench stands leaves the bench exactly as it
    was."""
    bench = Bench().after(A.UNAVAILABLE, T0, BenchPolicy())
    assert bench.after(A.UNAVAILABLE, T0 + MINUTE, BenchPolicy()) is bench
    assert bench.after(A.UNKNOWN, T0 + MINUTE, BenchPolicy()) is bench


def test_available_resets_the_ladder_but_the_bench_clears_on_expiry() -> None:
    """An available verdict resets the strikes but a standing bench lasts until it expires; the next
    bench then starts from the first cooldown."""
    bench = Bench().after(A.UNAVAILABLE, T0, BenchPolicy())
    cleared = bench.after(A.AVAILABLE, T0 + MINUTE, BenchPolicy())
    assert cleared.strikes == 0
    assert cleared.benched(T0 + MINUTE)
    assert not cleared.benched(T0 + 5 * MINUTE)
    again = cleared.after(A.UNAVAILABLE, T0 + 6 * MINUTE, BenchPolicy())
    assert again.until == T0 + 11 * MINUTE
    assert Bench().after(A.AVAILABLE, T0, BenchPolicy()) == Bench()


def test_unknown_never_benches() -> None:
    """An unknown verdict never benches a model."""
    assert not Bench().after(A.UNKNOWN, T0, BenchPolicy()).benched(T0)


@settings(max_examples=300)
@given(
    cooldown=st.integers(min_value=1, max_value=60),
    extra=st.integers(min_value=0, max_value=600),
    verdicts=st.lists(
        st.tuples(st.sampled_from(list(Availability)), st.integers(min_value=0, max_value=7200)),
        max_size=80,
    ),
)
def test_the_bench_never_exceeds_its_cap(
    cooldown: int, extra: int, verdicts: list[tuple[Availability, int]]
) -> None:
    """Whatever verdicts arrive when, a bench never stands longer than the cap from now,
    and nothing but an UNAVAILABLE verdict ever benches."""
    policy = BenchPolicy(cooldown=cooldown * MINUTE, cooldown_cap=(cooldown + extra) * MINUTE)
    bench, now, struck = Bench(), T0, False
    for availability, step in verdicts:
        now += timedelta(seconds=step)
        bench = bench.after(availability, now, policy)
        struck = struck or availability is A.UNAVAILABLE
        if bench.until is not None and bench.benched(now):
            assert bench.until - now <= policy.cooldown_cap
        assert struck or not bench.benched(now)


def test_a_bench_policy_refuses_nonsense() -> None:
    """A BenchPolicy with a zero cooldown or a cap below the cooldown is refused."""
    with pytest.raises(ValueError, match="cooldown"):
        BenchPolicy(cooldown=timedelta(0))
    with pytest.raises(ValueError, match="cooldown"):
        BenchPolicy(cooldown=10 * MINUTE, cooldown_cap=MINUTE)
