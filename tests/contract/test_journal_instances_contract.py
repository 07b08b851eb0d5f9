"""The journal's instance rows and incident owners (issue 24), on the fake, SQLite and
PostgreSQL: a renewal replaces its instance's row, rows come back latest renewal first and
bounded, a bad row is refused, an incident keeps the instance that first recorded it, and
``load_open(instance=...)`` gives an instance only its own incidents (and ownerless ones)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason, incident_id
from fleetd.health.states import (
    ControlLinkState,
    HealthStateName,
    InstanceState,
    LeadState,
    Scope,
)
from fleetd.journal.values import MAX_SUMMARY_BYTES, IncidentChange, InstanceRecord
from tests.contract.journal_cases import T0, make_incident

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

pytest_plugins = ["tests.contract.journal_fixtures"]


def row(name: str, seen: int = 0, **changes: Any) -> InstanceRecord:
    values: dict[str, object] = {
        "instance": name,
        "host": f"{name}-host",
        "version": "0.9.0",
        "started_at": T0,
        "last_seen": T0 + timedelta(seconds=seen),
        "leads": ("lead-a", "lead-b"),
        "coverage": "full",
        "summary": {"members": [{"name": "m1", "state": "IDLE"}], "count": 1},
        "renew_every": timedelta(seconds=15),
        "run": "r0000beef",
    }
    values.update(changes)
    return InstanceRecord(**values)  # type: ignore[arg-type]


async def test_a_renewal_replaces_the_row_and_rows_come_latest_first(
    journal_kit: JournalKit,
) -> None:
    """Each instance has one row; renewing it replaces every field; ``instances`` lists the
    latest renewal first and at most ``limit``; another client of the journal sees the same,
    the renewal interval and the run included (with or without the summaries); a row that
    states neither (written by an older build) reads back with neither. A renewal returns the
    row as it was before, without its summary (none: there was no row)."""
    journal = journal_kit.build()
    assert await journal.renew_instance(row("alpha", 0)) is None  # no row before
    await journal.renew_instance(row("beta", 10))
    renewed = row(
        "alpha",
        30,
        leads=("lead-c",),
        coverage="degraded",
        summary=None,
        renew_every=timedelta(milliseconds=60_500),
        run="r0000cafe",
    )
    before = await journal.renew_instance(renewed)  # the row as it was, without its summary
    assert before == row("alpha", 0, summary=None)
    other = journal_kit.build()
    listed = await other.instances()
    assert [r.instance for r in listed] == ["alpha", "beta"]
    assert listed[0] == renewed
    assert listed[1] == row("beta", 10)
    assert [r.instance for r in await other.instances(limit=1)] == ["alpha"]
    bare = await other.instances(summaries=False)
    assert [r.renew_every for r in bare] == [timedelta(milliseconds=60_500), timedelta(seconds=15)]
    await journal.renew_instance(row("beta", 40, renew_every=None, run=None))
    legacy = {r.instance: r for r in await other.instances()}["beta"]
    assert (legacy.renew_every, legacy.run) == (None, None)
    assert [r.run for r in bare] == ["r0000cafe", "r0000beef"]


@pytest.mark.parametrize(
    "bad",
    [
        {"instance": ""},
        {"host": "x" * 201},
        {"coverage": "not a code"},
        {"leads": ("",)},
        {"last_seen": T0.replace(tzinfo=None)},
        {"summary": {"blob": "x" * (MAX_SUMMARY_BYTES + 1)}},
        {"summary": {"nan": float("nan")}},
        {"renew_every": timedelta(0)},
        {"renew_every": timedelta(seconds=-15)},
        {"renew_every": timedelta(days=1, seconds=1)},
        {"run": "not a run"},
    ],
)
async def test_a_row_out_of_bounds_is_refused_and_nothing_is_written(
    journal_kit: JournalKit, bad: dict[str, object]
) -> None:
    """Empty or long text, a coverage that is no code, a naive time, a summary too large or not
    JSON, a renewal interval not positive or past a day: refused, and the journal holds no
    row."""
    journal = journal_kit.build()
    with pytest.raises(JournalRefusedError):
        await journal.renew_instance(row("alpha", 0, **bad))
    assert await journal.instances() == ()


async def test_an_incident_keeps_its_first_instance_and_load_open_filters_by_it(
    journal_kit: JournalKit,
) -> None:
    """The instance that first records an incident owns it (a later change by another keeps the
    owner); ``load_open(instance=...)`` gives each instance its own open incidents and the
    ownerless ones, while ``load_open()`` gives all; resolved unsettled ones filter the same."""
    journal = journal_kit.build()
    mine = make_incident("sess_a")
    theirs = make_incident("sess_b")
    legacy = make_incident("sess_c")
    await journal.record(IncidentChange(incident=mine, instance="alpha"), now=T0)
    await journal.record(IncidentChange(incident=theirs, instance="beta"), now=T0)
    await journal.record(IncidentChange(incident=legacy), now=T0)
    await journal.record(IncidentChange(incident=mine, instance="beta"), now=T0)
    stored = await journal.get(mine.id)
    assert stored is not None
    assert stored.instance == "alpha"

    def ids(snapshot_incidents: tuple[object, ...]) -> set[str]:
        return {s.incident.id for s in snapshot_incidents}  # type: ignore[attr-defined]

    alpha = await journal.load_open(instance="alpha")
    assert ids(alpha.open_incidents) == {mine.id, legacy.id}
    beta = await journal.load_open(instance="beta")
    assert ids(beta.open_incidents) == {theirs.id, legacy.id}
    assert ids((await journal.load_open()).open_incidents) == {mine.id, theirs.id, legacy.id}
    assert alpha.generation_floor == beta.generation_floor == 1

    await journal.record(
        IncidentChange(
            incident=theirs,
            resolved_at=T0,
            resolve_reason=ResolveReason.CLEARED,
            instance="beta",
        ),
        [],
        now=T0,
    )
    assert ids((await journal.load_open(instance="beta")).open_incidents) == {legacy.id}


def _of(instance: str | None, scope: Scope, subject: str, state: HealthStateName) -> IncidentChange:
    """An incident of ``instance``'s run (ids carry the run), keyed (scope, subject, state)."""
    incident = make_incident(subject, scope=scope, state=state, cause="c", target=None)
    namespace = f"run-{instance}"
    return IncidentChange(
        incident=dataclasses.replace(
            incident, id=incident_id(incident.key, incident.generation, namespace)
        ),
        instance=instance,
    )


async def test_one_key_is_open_once_per_instance_and_an_instances_liveness_once(
    journal_kit: JournalKit,
) -> None:
    """Every instance's herdr link is ``herdr`` and two may have a lead of the same name: each
    instance's incident of that key is recorded and open beside the other's (the second was
    refused ``open_key_conflict`` and its person never paged). An instance's liveness
    (scope ``instance``) is the whole journal's: the second record of the same open key is
    refused, as is the same generation of it. Within one instance the open key still holds."""
    journal = journal_kit.build()
    link = (Scope.CONTROL_LINK, "herdr", ControlLinkState.CONTROL_LINK_DOWN)
    lead = (Scope.LEAD, "lead", LeadState.LEAD_UNREACHABLE)
    for key in (link, lead):
        for instance in ("alpha", "beta"):
            await journal.record(_of(instance, *key), now=T0)
    opened = (await journal.load_open()).open_incidents
    assert sorted((s.instance, s.incident.scope.value) for s in opened) == [
        ("alpha", "control_link"),
        ("alpha", "lead"),
        ("beta", "control_link"),
        ("beta", "lead"),
    ]
    again = _of("alpha", *link)
    again = dataclasses.replace(
        again, incident=dataclasses.replace(again.incident, id="inc_another_run_of_alpha")
    )
    with pytest.raises(JournalRefusedError, match="conflict"):
        await journal.record(again, now=T0)
    down = (Scope.INSTANCE, "gamma", InstanceState.INSTANCE_DOWN)
    await journal.record(_of("alpha", *down), now=T0)
    with pytest.raises(JournalRefusedError, match="conflict"):
        await journal.record(_of("beta", *down), now=T0)
