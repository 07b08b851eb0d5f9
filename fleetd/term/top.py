"""``fleetd top``: the status screen, live, in a textual app.

It follows ``GET /v1/fleet?sinceVersion=N&wait=S``: each answer with a new ``viewVersion`` is
drawn at once, and the next poll waits for the version after it. Keys: ``l`` cycles the lead
filter through the leads, ``a`` shows every lead again, ``i`` switches to the incident screen
(``GET /v1/incidents``, read again with each new version) and back, ``q`` quits. Who is asking
(``GET /v1/whoami``) is read once, before the app starts.

With ``--all`` it shows every fleetd sharing the journal (``GET /v1/fleet?scope=all``, the
operator's), one block per instance as ``fleetd status --all`` prints it; that answer does not
long-poll, so it is read again every :data:`ALL_REFRESH_SECONDS`.

While fleetd is unreachable the last screen stays, its header says so, and the poll is tried
again after a pause that doubles up to :data:`MAX_RETRY_SECONDS`. A refused token ends the app
with exit code 4 and fleetd's words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from fleetd.term.client import FleetdClient, RefusedError, TermError
from fleetd.term.view import fleet_all_screen, fleet_screen, incident_screen

__all__ = ["ALL_REFRESH_SECONDS", "MAX_RETRY_SECONDS", "POLL_WAIT_SECONDS", "TopApp"]

POLL_WAIT_SECONDS = 25.0
ALL_REFRESH_SECONDS = 2.0
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 8.0


class TopApp(App[int]):
    """The live fleet screen of one fleetd; returns the process exit code."""

    TITLE = "fleetd top"
    CSS = "#screen { height: 1fr; }"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("l", "next_lead", "lead filter"),
        Binding("a", "all_leads", "all leads"),
        Binding("i", "incidents", "incidents"),
        Binding("q", "quit_top", "quit"),
    ]

    def __init__(
        self,
        client: FleetdClient,
        first: dict[str, Any],
        *,
        who: str,
        lead: str | None = None,
        wait: float = POLL_WAIT_SECONDS,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        every: bool = False,
        refresh: float = ALL_REFRESH_SECONDS,
    ) -> None:
        super().__init__()
        self.client = client
        self.fleet = first
        self.who = who
        """Who is asking (``operator``, ``lead NAME``): fleetd's ``GET /v1/whoami``."""
        self.listing: dict[str, Any] | None = None
        self.lead = lead
        self.show_incidents = False
        self.notice = ""
        self.failure = ""
        """Why the app ended with a non-zero code (for the command to print)."""
        self._wait = wait
        self._now = now
        self.every = every
        """Every fleetd sharing the journal (``scope=all``), read every ``refresh`` seconds."""
        self._refresh = refresh
        self.lines: list[str] = []
        """The screen last drawn, as plain text."""
        self.ended = asyncio.Event()
        """Set when the app was asked to end (a key, or a refused token)."""
        self.drawn = asyncio.Event()
        """Set each time the screen is drawn again (tests wait on it)."""

    def compose(self) -> ComposeResult:
        yield Static(id="screen")
        yield Footer()

    def on_mount(self) -> None:
        self.draw()
        self.run_worker(self._follow(), exclusive=True, group="poll")

    def on_resize(self) -> None:
        self.draw()

    @property
    def leads(self) -> list[str]:
        if not self.every:
            return [str(row.get("name")) for row in self.fleet.get("leads", [])]
        names: list[str] = []
        for part in self.fleet.get("instances", []):
            fleet = part.get("view") or part.get("summary") or {}
            names += [str(row.get("name")) for row in fleet.get("leads", [])]
        return list(dict.fromkeys(names))

    def draw(self) -> None:
        """Draw the screen the keys chose from the data at hand."""
        screen = self.query_one("#screen", Static)
        width = max(self.size.width, 20)
        height = max(self.size.height - 1, 3)  # the footer takes a line
        source = self.client.target.shown
        if self.show_incidents and self.listing is not None:
            lines = incident_screen(
                self.listing,
                source=source,
                who=self.who,
                now=self._now(),
                lead=self.lead,
                width=width,
                height=height,
            )
        else:
            lines = (fleet_all_screen if self.every else fleet_screen)(
                self.fleet,
                source=source,
                who=self.who,
                lead=self.lead,
                notice=self.notice,
                width=width,
                height=height,
            )
        self.lines = [line.plain for line in lines]
        screen.update(Text("\n").join(lines))
        self.drawn.set()

    async def action_next_lead(self) -> None:
        leads = self.leads
        if not leads:
            return
        at = leads.index(self.lead) + 1 if self.lead in leads else 0
        self.lead = leads[at] if at < len(leads) else None
        self.draw()

    async def action_all_leads(self) -> None:
        self.lead = None
        self.draw()

    async def action_incidents(self) -> None:
        self.show_incidents = not self.show_incidents
        if self.show_incidents:
            await self._read_incidents()
        self.draw()

    async def action_quit_top(self) -> None:
        self.ended.set()
        self.exit(0)

    async def _read_incidents(self) -> None:
        try:
            self.listing = await self.client.incidents()
        except RefusedError as refused:
            self._refused(refused)
        except TermError as failed:
            self.show_incidents = False
            self.notice = str(failed)

    def _refused(self, refused: RefusedError) -> None:
        self.failure = str(refused)
        self.ended.set()
        self.exit(refused.exit_code, return_code=refused.exit_code)

    async def _follow(self) -> None:
        """Long-poll the fleet view for as long as the app runs."""
        retry = FIRST_RETRY_SECONDS
        while True:
            version = int(self.fleet.get("viewVersion", 0))
            try:
                if self.every:
                    await asyncio.sleep(self._refresh)
                    fleet = await self.client.fleet(every=True)
                else:
                    fleet = await self.client.fleet(since_version=version, wait=self._wait)
            except RefusedError as refused:
                self._refused(refused)
                return
            except TermError as failed:
                self.notice = f"{failed}; retrying"
                self.draw()
                await asyncio.sleep(retry)
                retry = min(retry * 2, MAX_RETRY_SECONDS)
                continue
            retry = FIRST_RETRY_SECONDS
            changed = self.every or fleet.get("viewVersion") != version or self.notice
            self.fleet, self.notice = fleet, ""
            if changed:
                if self.show_incidents:
                    await self._read_incidents()
                self.draw()
