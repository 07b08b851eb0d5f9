"""The live fleet page in a real headless Chromium against real ``fleetd serve``/``fleetd sim``
processes: it follows the fleet through the long-poll without reloading, shows an incident open
and resolve, shows an unreachable fleetd and recovers, and never puts the token in a URL."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, expect

from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import InstanceRecord
from fleetd.runtime.fleet_summary import (
    InstanceSummary,
    SummaryCoverage,
    SummaryIncident,
    SummaryLead,
    SummaryLeadHealth,
    SummaryLink,
    SummaryRouting,
)
from tests.e2e.page_fleet import (
    LEAD_B_TOKEN,
    LEAD_TOKEN,
    OPERATOR_TOKEN,
    PageFleet,
    Recorded,
)

_TICKS = 60_000  # health looks every 15 s: an incident opens and resolves within a few ticks


def _sign_in(page: Page, base: str, token: str) -> None:
    page.goto(base + "/")
    page.fill("#token", token)
    page.click("#signin button[type=submit]")


def _same_origin_and_tokenless(page: Page, record: Recorded, base: str, *tokens: str) -> None:
    """Every request and navigation stayed on this fleetd, none named a token; no cookie set."""
    assert record.requests
    assert page.context.cookies() == []
    for url in record.requests + record.navigations:
        assert url.startswith(base + "/"), f"the page fetched from elsewhere: {url}"
        for token in tokens:
            assert token not in url


def test_page_follows_the_fleet_live_through_an_incident_and_an_outage(
    page_fleet: PageFleet, browser_page: tuple[Page, Recorded]
) -> None:
    """Signed in as the operator: a member spawned after load appears without a reload, a GONE
    incident shows open then resolved with its routing, a killed fleetd shows as unreachable and
    a restarted one as live again; no console error or failed request outside the outage, and
    the token never in a URL."""
    page, record = browser_page
    first = page_fleet.tool(LEAD_TOKEN, "fleet_spawn", profile="sonnet", name="m-before")
    _sign_in(page, page_fleet.base, OPERATOR_TOKEN)
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#who")).to_have_text("signed in as operator")
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator(f'#members tr[data-session="{first["sessionId"]}"]')).to_contain_text(
        "m-before"
    )
    expect(page.locator('#leads tr[data-lead="lead-b"]')).to_be_visible()
    expect(page.locator("#deps")).to_contain_text("herdr link")
    expect(page.locator("#deps")).to_contain_text("Coverage")

    later = page_fleet.tool(LEAD_TOKEN, "fleet_spawn", profile="sonnet", name="m-after")
    expect(page.locator(f'#members tr[data-session="{later["sessionId"]}"]')).to_contain_text(
        "m-after"
    )

    doomed = page_fleet.tool(LEAD_TOKEN, "fleet_spawn", profile="sonnet", name="m-exit-1")
    sid = doomed["sessionId"]
    expect(page.locator(f'#members tr[data-session="{sid}"]')).to_contain_text(
        "ready", timeout=_TICKS
    )
    page_fleet.tool(LEAD_TOKEN, "fleet_send", target=sid, prompt="a task")
    incident = page.locator("#incidents tr[data-incident]", has_text=sid)
    expect(incident).to_have_attribute("data-status", "open", timeout=_TICKS)
    expect(incident).to_contain_text("GONE")
    expect(incident).to_contain_text("lead · owner")
    expect(incident).to_have_attribute("data-status", "resolved", timeout=_TICKS)
    assert len(record.navigations) == 1, record.navigations  # never reloaded
    assert record.errors() == []
    assert record.failed == []

    page_fleet.kill_serve()
    expect(page.locator("#status")).to_have_attribute("data-state", "unreachable")
    expect(page.locator("#status")).to_contain_text("unreachable")
    page_fleet.start_serve()
    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=30_000)
    again = page_fleet.tool(LEAD_TOKEN, "fleet_spawn", profile="sonnet", name="m-again")
    expect(page.locator(f'#members tr[data-session="{again["sessionId"]}"]')).to_be_visible()
    assert len(record.navigations) == 1
    outage = re.compile(
        r"net::ERR_(CONNECTION_(REFUSED|RESET|CLOSED|ABORTED)|EMPTY_RESPONSE|SOCKET_NOT_CONNECTED)"
    )  # the ways a connection to a dead process fails; never an HTTP error or a blocked request
    assert all(outage.search(text) for text in record.errors()), record.errors()
    assert record.failed  # the long-poll in flight and the retries while fleetd was away
    assert all(outage.search(reason) for _, reason in record.failed), record.failed
    # An SQLite journal serves one fleetd: its first scope=all answer says so, nothing more asked.
    assert [u for u in record.requests if "scope=all" in u] == [
        page_fleet.base + "/v1/fleet?scope=all"
    ]
    expect(page.locator("#instances")).to_be_hidden()
    _same_origin_and_tokenless(page, record, page_fleet.base, OPERATOR_TOKEN, LEAD_TOKEN)


@pytest.mark.parametrize("browser_page", [{"width": 375, "height": 740}], indirect=True)
def test_a_lead_on_a_phone_sees_its_own_part_without_sideways_scrolling(
    page_fleet: PageFleet, browser_page: tuple[Page, Recorded]
) -> None:
    """A refused token shows as such and nothing else; a lead then sees its own members and not
    the other lead's, on a phone-width viewport that never scrolls sideways; a reload keeps the
    tab signed in (session storage) and sign-out forgets the token."""
    page, record = browser_page
    mine = page_fleet.tool(LEAD_TOKEN, "fleet_spawn", profile="sonnet", name="m-mine")
    theirs = page_fleet.tool(LEAD_B_TOKEN, "fleet_spawn", profile="sonnet", name="m-theirs")
    _sign_in(page, page_fleet.base, "not-a-token")
    expect(page.locator("#status")).to_have_attribute("data-state", "unauthorized")
    expect(page.locator("#signin")).to_be_visible()
    refused = record.errors()
    assert refused
    assert all("401" in text for text in refused), refused

    page.fill("#token", LEAD_TOKEN)
    page.click("#signin button[type=submit]")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#who")).to_have_text("signed in as lead lead")
    expect(page.locator("#signin")).to_be_hidden()
    expect(page.locator(f'#members tr[data-session="{mine["sessionId"]}"]')).to_be_visible()
    expect(page.locator(f'#members tr[data-session="{theirs["sessionId"]}"]')).to_have_count(0)
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths

    page.reload()
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    page.click("#signout")
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#view")).to_be_hidden()
    assert page.evaluate("sessionStorage.length") == 0
    assert record.errors() == refused
    # Only the long-polls the reload and the sign-out cut short.
    assert all(reason == "net::ERR_ABORTED" for _, reason in record.failed), record.failed
    assert not [u for u in record.requests if "scope=" in u]  # the operator's alone
    expect(page.locator("#instances")).to_be_hidden()
    _same_origin_and_tokenless(page, record, page_fleet.base, LEAD_TOKEN, "not-a-token")


def _summary(name: str, incident_state: str) -> dict[str, object]:
    """What instance ``name`` publishes: lead ``lead-x`` AT_RISK, three members, one open
    incident routed to a person."""
    summary = InstanceSummary(
        instance=name,
        generated_at=datetime.now(UTC).isoformat(),
        control_link=SummaryLink(state="up"),
        health_coverage=SummaryCoverage(status="partial", reason="no webhook configured"),
        leads=[
            SummaryLead(
                name="lead-x",
                agent="lead-x",
                live_status="working",
                health=SummaryLeadHealth(
                    state="AT_RISK", age_seconds=12.0, assigned_foreign_incidents=0
                ),
            )
        ],
        members=[],
        members_total=3,
        members_by_lead={"lead-x": 3},
        incidents=[
            SummaryIncident(
                id=f"inc-{name}",
                scope="member",
                subject=f"m-{name}",
                state=incident_state,
                severity="critical",
                age_seconds=40.0,
                routing=SummaryRouting(route="human", reason="lead_unhealthy", generation=2),
            )
        ],
        incidents_total=1,
        capacity=[],
    )
    return summary.model_dump(mode="json", by_alias=True, exclude_none=True)


def _publish(url: str, name: str, host: str, silent: timedelta, incident_state: str) -> None:
    """Another fleetd's row in the shared journal, last renewed ``silent`` ago."""

    async def renew() -> None:
        journal = SqlJournal(url)
        try:
            now = datetime.now(UTC)
            await journal.renew_instance(
                InstanceRecord(
                    instance=name,
                    host=host,
                    version="9.9",
                    started_at=now - timedelta(hours=1),
                    last_seen=now - silent,
                    leads=("lead-x",),
                    coverage="partial",
                    summary=_summary(name, incident_state),
                )
            )
        finally:
            await journal.close()

    with ThreadPoolExecutor(max_workers=1) as pool:  # Playwright's own loop runs on this thread
        pool.submit(lambda: asyncio.run(renew())).result(timeout=30)


@pytest.mark.postgres
def test_the_operator_sees_the_other_instances_sharing_the_journal_and_a_down_one_as_down(
    shared_page_fleet: PageFleet, browser_page: tuple[Page, Recorded]
) -> None:
    """``fleetd serve`` on a PostgreSQL journal beside two other instances' rows: the operator's
    page shows an Instances section with each other fleetd's host, its coverage, its lead with
    health, its member count and its open incident with routing; one silent for ten minutes is
    marked DOWN, the one renewed just now is up; the rest of the page is unchanged, scope=all
    is read again without a reload, and never with a token in the URL. With fleetd gone the
    section says it cannot read the instances and keeps the last blocks; back, it reads again."""
    page, record = browser_page
    fleet = shared_page_fleet
    _publish(fleet.journal_url, "page-b", "host-b", timedelta(0), "UNRESPONSIVE")
    _publish(fleet.journal_url, "page-c", "host-c", timedelta(minutes=10), "GONE")
    _sign_in(page, fleet.base, OPERATOR_TOKEN)
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator('#leads tr[data-lead="lead-b"]')).to_be_visible()
    section = page.locator("#instances")
    expect(section).to_be_visible()
    expect(page.locator("#instances .instance[data-instance='page-a']")).to_have_count(0)
    up = section.locator(".instance[data-instance='page-b']")
    down = section.locator(".instance[data-instance='page-c']")
    expect(up.locator("[data-role=state]")).to_have_text("up")
    expect(up).to_contain_text("host-b · renewed")
    expect(up).to_contain_text("partial · no webhook configured")
    expect(up.locator("[data-role=leads]")).to_contain_text("lead lead-x (working): AT_RISK")
    expect(up).to_contain_text("3: lead-x 3")
    incident = up.locator("[data-role=incidents] li[data-incident='inc-page-b']")
    expect(incident).to_contain_text("UNRESPONSIVE m-page-b (critical, 40 s)")
    expect(incident).to_contain_text("a person · lead_unhealthy · generation 2")
    expect(down.locator("[data-role=state]")).to_have_text("DOWN")
    expect(down.locator("[data-role=state]")).to_have_class("bad")
    expect(down).to_have_attribute("data-down", "true")
    expect(down).to_contain_text("host-c · renewed 10 min ago · stopped renewing")
    expect(down.locator("li[data-incident='inc-page-c']")).to_contain_text("GONE")
    expect(section.locator("#instances-note")).to_contain_text("2 other fleetd(s)")
    expect(section.locator("#instances-note")).to_contain_text("1 down")

    _publish(fleet.journal_url, "page-b", "host-b", timedelta(0), "STALLED")
    expect(up.locator("li[data-incident='inc-page-b']")).to_contain_text("STALLED")
    assert len([u for u in record.requests if u.endswith("/v1/fleet?scope=all")]) >= 2
    assert len(record.navigations) == 1
    assert record.errors() == []
    assert record.failed == []

    fleet.kill_serve()  # a failed read says so in the section; the rest stays as it was
    note = section.locator("#instances-note")
    expect(note).to_contain_text("the other instances cannot be read now (fleetd unreachable)")
    expect(note).to_have_class("bad")
    expect(down.locator("[data-role=state]")).to_have_text("DOWN")
    expect(page.locator('#leads tr[data-lead="lead-b"]')).to_be_visible()
    fleet.start_serve()
    expect(page.locator("#status")).to_have_attribute("data-state", "live", timeout=30_000)
    expect(note).to_contain_text("2 other fleetd(s)", timeout=30_000)
    assert len(record.navigations) == 1
    _same_origin_and_tokenless(page, record, fleet.base, OPERATOR_TOKEN)
