"""What each fleet tool answers: one result model per tool, the source of its result contract.

``contracts/api/<tool>.result.schema.json`` is generated from these models (see
:mod:`fleetd.api.schemas`), and the registry validates every handler's output against its tool's
model. The bridge's answers (tickets, member rows, releases, replies, capacity rows) are built as
their models where they are made (:mod:`fleetd.bridge.answers`), the parts of ``fleet_list`` in
:mod:`fleetd.runtime.fleet_models`, both re-exported here; the inbox drain is built here. Field
names are camelCase on the wire.

A field that is *absent* when there is nothing to say is typed ``X | Absent`` (never ``null`` in
the schema, and no ``default``: a default of ``null`` on a field whose schema refuses null is an
invalid schema, which OpenAPI validators reject); a field that is always present but may be
unknown is ``X | None`` with no default.
Models refuse unknown fields, except where the payload is genuinely open (inbox evidence).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, RootModel

from fleetd.bridge.answers import (
    Absent,
    CapacityRow,
    ModelHealthFlag,
    OpenTurn,
    ReleaseResult,
    ReplyResult,
    SessionRow,
    TicketResult,
    WireModel,
)
from fleetd.inbox.records import MessageKind, ReplySource, Severity
from fleetd.runtime import FleetAllResult, FleetInstancePart
from fleetd.runtime.fleet_models import (
    DependenciesBlock,
    FleetHealthBlock,
    FleetListResult,
    FleetMember,
    LeadRow,
    LiveAgent,
    OrphanMember,
)

__all__ = [
    "CapacityRow",
    "DependenciesBlock",
    "FleetAllAnswer",
    "FleetAllResult",
    "FleetHealthBlock",
    "FleetInstancePart",
    "FleetListResult",
    "FleetMember",
    "InboxDrainResult",
    "LeadRow",
    "LiveAgent",
    "ModelHealthFlag",
    "OpenTurn",
    "OrphanMember",
    "PollResult",
    "ReleaseResult",
    "ReplyResult",
    "SessionRow",
    "TicketResult",
]


class InboxMessage(WireModel):
    """One drained inbox record: a member's reply or a health report."""

    msg_id: str
    kind: MessageKind
    target: str
    content: str
    created_at_epoch_millis: int | Absent = None
    ticket: str | Absent = None
    source: ReplySource | Absent = None
    severity: Severity | Absent = None
    state: str | Absent = None
    subject_terminal: str | Absent = None
    suggested_tool_calls: list[str] | Absent = None
    evidence: dict[str, str | int | float | bool | None] | Absent = None  # open: flat facts


class InboxDrainResult(WireModel):
    """``fleet_poll`` without a ticket: what was taken from the caller's inbox, oldest first."""

    inbox: str
    messages: list[InboxMessage]


class PollResult(RootModel[TicketResult | InboxDrainResult]):
    """``fleet_poll``: one ticket, or an inbox drain."""


class FleetAllAnswer(WireModel):
    """The success branch of ``GET /v1/fleet?scope=all``'s answer."""

    model_config = ConfigDict(alias_generator=None)

    ok: Literal[True]
    result: FleetAllResult
