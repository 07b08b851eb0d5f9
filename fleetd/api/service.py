"""What the HTTP shell needs of the service it serves, as a port.

:func:`~fleetd.api.app.create_app` takes any :class:`FleetService`; it never imports the
composition root. :class:`fleetd.compose.Fleetd` satisfies the protocol structurally, and so can a
test double. The members are exactly the ones the app reads: the lifecycle (``start``/``stop``,
``started``), the probes' sources (the scheduler, the inbox, the control link and its health
classification, the fleet view's inbox component, the config status, the metrics), what the tool
routes are built from (the registry, the authenticator, the versioned fleet view and the run id
its ``ETag`` values name, ``across`` for ``scope=all``) and the incident journal's operator view
(:class:`IncidentService`: ``incidents`` and ``replay``).
"""

from __future__ import annotations

from typing import Protocol

from fleetd.api.auth import Authenticator
from fleetd.api.http_tools import FleetAcrossView, FleetVersions
from fleetd.api.tools import ToolRegistry
from fleetd.config import ConfigRef
from fleetd.identity import Caller
from fleetd.inbox.port import ReplyInbox
from fleetd.metrics import Metrics
from fleetd.notify.desk import IncidentListing, ReplayResult
from fleetd.runtime import FleetHealthComponent
from fleetd.runtime.fleet_models import ControlLink
from fleetd.runtime.fleet_view import FleetViewBuilder
from fleetd.runtime.link import LinkState
from fleetd.runtime.scheduler import Scheduler

__all__ = ["FleetService", "HealthReport", "InboxHolder", "IncidentService"]


class InboxHolder(Protocol):
    """The part of the bridge ``/readyz`` reads: its reply inbox."""

    @property
    def inbox(self) -> ReplyInbox: ...


class HealthReport(Protocol):
    """The part of the health monitor ``/healthz`` reads."""

    def link_view(self, link: LinkState) -> ControlLink:
        """The control link component: classification and the last herdr call."""
        ...

    def component(self) -> FleetHealthComponent:
        """The ``fleetHealth`` component."""
        ...


class IncidentService(Protocol):
    """The incident journal, as ``/v1/incidents`` sees it (:class:`~fleetd.notify.desk.IncidentDesk`
    behind the service). Both raise :class:`~fleetd.errors.JournalError` when the journal cannot
    answer."""

    async def incidents(self, caller: Caller) -> IncidentListing:
        """Open and recently resolved incidents ``caller`` (an operator or a lead) may see."""
        ...

    async def replay(self, incident_id: str) -> ReplayResult:
        """Re-arm the incident's permanently failed events."""
        ...


class FleetService(IncidentService, Protocol):
    """One running fleetd, as the HTTP shell sees it."""

    @property
    def started(self) -> bool: ...
    @property
    def scheduler(self) -> Scheduler: ...
    @property
    def bridge(self) -> InboxHolder: ...
    @property
    def registry(self) -> ToolRegistry: ...
    @property
    def authenticator(self) -> Authenticator: ...
    @property
    def health(self) -> HealthReport: ...
    @property
    def link(self) -> LinkState: ...
    @property
    def view(self) -> FleetViewBuilder: ...
    @property
    def views(self) -> FleetVersions: ...
    @property
    def across(self) -> FleetAcrossView | None: ...
    @property
    def run(self) -> str: ...
    @property
    def config(self) -> ConfigRef: ...
    @property
    def metrics(self) -> Metrics: ...

    async def start(self) -> None:
        """Start the loops; the app's lifespan calls it before serving."""
        ...

    async def stop(self) -> None:
        """Stop the loops; the app's lifespan calls it after serving."""
        ...
