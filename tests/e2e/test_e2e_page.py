"""The live fleet page in a real headless Chromium against real ``fleetd serve``/``fleetd sim``
processes: it follows the fleet through the long-poll without reloading, shows an incident open
and resolve, shows an unreachable fleetd and recovers, and never puts the token in a URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

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
    _same_origin_and_tokenless(page, record, page_fleet.base, LEAD_TOKEN, "not-a-token")
