"""The fleet tools: what leads and members can call, defined once for HTTP and MCP.

Leads call ``fleet_spawn``, ``fleet_send``, ``fleet_poll``, ``fleet_status``, ``fleet_list`` and
``fleet_stop``; members call ``fleet_reply``; an operator token may read ``fleet_list``. Each
handler is a thin translation from validated params to one :class:`~fleetd.bridge.service.Bridge`
call and back to a JSON-able result. Argument names are camelCase on the wire, as leads see them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from fleetd.api.results import (
    FleetListResult,
    InboxDrainResult,
    InboxMessage,
    PollResult,
    ReleaseResult,
    ReplyResult,
    SessionRow,
    TicketResult,
)
from fleetd.api.tools import Caller, Role, ToolAnswer, ToolParams, ToolRegistry, ToolSpec
from fleetd.bridge.answers import ticket_result
from fleetd.bridge.backlog import member_backlogs, read_lead_stats
from fleetd.bridge.release import stop_cause
from fleetd.bridge.service import Bridge
from fleetd.bridge.spawn import SpawnRequest
from fleetd.errors import (
    HerdrError,
    InvalidArgumentsError,
    PermissionDeniedError,
    TicketExpiredError,
    UnknownTicketError,
)
from fleetd.inbox.records import InboxRecord
from fleetd.runs import run_of_ticket
from fleetd.text import INVISIBLE

__all__ = ["MAX_WAIT_SECONDS", "register_fleet_tools"]

#: The longest a synchronous ``fleet_send`` may hold its caller.
MAX_WAIT_SECONDS = 600.0

_LEAD = frozenset({Role.LEAD})


class SpawnParams(ToolParams):
    profile: str = Field(min_length=1, max_length=64, description="Profile name from the config.")
    role: str | None = Field(
        default=None,
        max_length=64,
        pattern=f"^[^{INVISIBLE}]*$",
        description="Free-text role label: one line, no control or invisible characters "
        "(bidi overrides, zero-width space, line separators).",
    )
    name: str | None = Field(default=None, max_length=32, description="herdr agent name.")
    repo: str | None = Field(default=None, max_length=4096, description="Repository to branch.")
    base: str | None = Field(default=None, max_length=256, description="Base ref of the branch.")


class SendParams(ToolParams):
    target: str = Field(min_length=1, max_length=128, description="Session id, name or pane id.")
    prompt: str = Field(min_length=1, description="The task for the member.")
    wait: float | None = Field(
        default=None,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Seconds to wait for the reply; absent or 0 returns the ticket at once.",
    )


class PollParams(ToolParams):
    """Give ticket to look up one ticket, or nothing (or target) to drain your inbox; not both."""

    # "not both" in the schema itself, without a top-level combinator (which tool clients refuse)
    model_config = ConfigDict(json_schema_extra={"maxProperties": 1})

    ticket: str | None = Field(default=None, max_length=128, description="A ticket to look up.")
    target: str | None = Field(
        default=None, max_length=128, description="Inbox to drain (your own lead name)."
    )

    @model_validator(mode="after")
    def _one_of(self) -> PollParams:
        if self.ticket is not None and self.target is not None:
            raise PydanticCustomError(
                "ticket_or_target",
                "give ticket or target, not both: ticket looks one up, target drains your inbox",
            )
        return self


class StatusParams(ToolParams):
    session_id: str = Field(alias="sessionId", min_length=1, max_length=128)


class ListParams(ToolParams):
    pass


class StopParams(ToolParams):
    """Give exactly one of sessionId or paneId."""

    # "exactly one" in the schema itself, without a top-level combinator (which clients refuse)
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})

    session_id: str | None = Field(default=None, alias="sessionId", max_length=128)
    pane_id: str | None = Field(default=None, alias="paneId", max_length=128)

    @model_validator(mode="after")
    def _exactly_one(self) -> StopParams:
        if (self.session_id is None) == (self.pane_id is None):
            raise PydanticCustomError("session_or_pane", "give exactly one of sessionId or paneId")
        return self


class ReplyParams(ToolParams):
    """Answer the task your lead sent you, once; with no task open the call is no_open_task."""

    content: str = Field(min_length=1, description="The result of the delegated task.")


FleetView = Callable[[Caller], Awaitable[dict[str, Any]]]
Spawner = Callable[[SpawnRequest], Awaitable[SessionRow]]


def register_fleet_tools(
    registry: ToolRegistry, *, bridge: Bridge, fleet_view: FleetView, spawn: Spawner
) -> None:
    """Register the seven fleet tools on ``registry``."""

    async def fleet_spawn(caller: Caller, p: SpawnParams) -> SessionRow:
        return await spawn(
            SpawnRequest(
                owner=caller.name,
                profile=p.profile,
                role=p.role,
                name=p.name,
                repo=p.repo,
                base=p.base,
            )
        )

    async def fleet_send(caller: Caller, p: SendParams) -> TicketResult:
        ticket = await bridge.send(owner=caller.name, target=p.target, prompt=p.prompt, wait=p.wait)
        session = bridge.reads.session(ticket.target)
        flag = None
        if session is not None:  # accepted all the same; the lead reads that its model is down
            flag = bridge.view.model_health(session.profile, bridge.clock.now())
        return ticket_result(ticket, flag)

    async def fleet_poll(caller: Caller, p: PollParams) -> ToolAnswer:
        if p.ticket is not None:
            ticket = bridge.reads.ticket(p.ticket)
            if ticket is None or ticket.owner != caller.name:
                raise _unknown_ticket(bridge, p.ticket)
            return ticket_result(ticket)
        key = p.target or caller.name
        if key != caller.name:
            raise PermissionDeniedError("a lead may drain only its own inbox")
        records = await bridge.outbox.drain(key)
        try:
            return InboxDrainResult(inbox=key, messages=[_message(r) for r in records])
        except BaseException:  # the inbox acknowledged them: the next drain gives them instead
            bridge.outbox.hand_back(key, records)
            raise

    async def fleet_status(caller: Caller, p: StatusParams) -> SessionRow:
        session = bridge.reads.find_owned(caller.name, p.session_id, released=True)
        stats = await read_lead_stats(bridge.inbox, [session.owner])
        session = bridge.reads.session(session.session_id) or session  # as it is after the read
        backlog = member_backlogs(stats, bridge.reads.sessions()).get(session.session_id)
        row = bridge.view.session_row(session, now=bridge.clock.now(), backlog=backlog)
        if not session.live:
            return row
        try:  # herdr's status now, not what the poller saw while it last watched
            agent = await bridge.control.get_agent(session.name)
            live_status: str | None = agent.agent_status.value
        except HerdrError:
            live_status = None  # herdr cannot say right now
        return row.model_copy(update={"live_status": live_status})

    async def fleet_list(caller: Caller, p: ListParams) -> dict[str, Any]:
        return await fleet_view(caller)

    async def fleet_stop(caller: Caller, p: StopParams) -> ReleaseResult:
        target = p.session_id or p.pane_id
        if target is None:  # guarded by the params model
            raise InvalidArgumentsError(
                "give exactly one of sessionId or paneId", rule="session_or_pane"
            )
        orphan = bridge.orphans.find(target)
        if orphan is not None and orphan.mark.owner == caller.name:
            return await bridge.orphans.stop(orphan)
        session = bridge.reads.find_owned(caller.name, target)
        pending = bool(bridge.reads.pending_for(session.session_id))
        cause = stop_cause(session.state.value, pending)
        return await bridge.lifecycle.release(session, cause)

    async def fleet_reply(caller: Caller, p: ReplyParams) -> ReplyResult:
        if caller.session_id is None:
            raise PermissionDeniedError("only a member session may reply")
        return await bridge.replies.reply(session_id=caller.session_id, content=p.content)

    specs: list[ToolSpec[Any]] = [
        ToolSpec(
            name="fleet_spawn",
            description="Start a member agent of a profile in its own herdr pane and worktree.",
            params=SpawnParams,
            roles=_LEAD,
            handler=fleet_spawn,
            result=SessionRow,
        ),
        ToolSpec(
            name="fleet_send",
            description=(
                "Send a task to one of your members. Returns a ticket; with wait > 0, waits up to "
                "that many seconds for the reply."
            ),
            params=SendParams,
            roles=_LEAD,
            handler=fleet_send,
            result=TicketResult,
        ),
        ToolSpec(
            name="fleet_poll",
            description=(
                "Look up a ticket, or drain your inbox of replies and health reports "
                "(give ticket or target, not both; inbox_unavailable: nothing was taken, poll "
                "again later)."
            ),
            params=PollParams,
            roles=_LEAD,
            handler=fleet_poll,
            result=PollResult,
            # It drains only the caller's own inbox, into the caller's answer: no member, task
            # or other lead changes.
            read_only=True,
        ),
        ToolSpec(
            name="fleet_status",
            description="The state of one of your members.",
            params=StatusParams,
            roles=_LEAD,
            handler=fleet_status,
            result=SessionRow,
            read_only=True,
        ),
        ToolSpec(
            name="fleet_list",
            description="The fleet: members, leads, capacity, incidents and the control link.",
            params=ListParams,
            roles=frozenset({Role.LEAD, Role.OPERATOR}),
            handler=fleet_list,
            result=FleetListResult,
            read_only=True,
        ),
        ToolSpec(
            name="fleet_stop",
            description=(
                "Stop one of your members, or an orphan of a previous run (give exactly one of "
                "sessionId or paneId); its pending tasks fail once, never replayed."
            ),
            params=StopParams,
            roles=_LEAD,
            handler=fleet_stop,
            result=ReleaseResult,
            destructive=True,  # the member ends and its pending tasks fail
            idempotent=True,  # a second stop of the same member has no further effect
        ),
        ToolSpec(
            name="fleet_reply",
            description=(
                "Return the result of your delegated task to the lead that sent it, once per task. "
                "It is answered once the reply is stored; inbox_unavailable means it was not "
                "stored: call again. "
                "With no task open it is refused (no_open_task); a reply just after fleetd read "
                "your turn's end from the pane still reaches the lead, marked late."
            ),
            params=ReplyParams,
            roles=frozenset({Role.MEMBER}),
            handler=fleet_reply,
            result=ReplyResult,
        ),
    ]
    for spec in specs:
        registry.register(spec)


def _unknown_ticket(bridge: Bridge, ticket: str) -> UnknownTicketError:
    """No such ticket for this lead; a ticket of a previous run says that fleetd restarted, and
    one of this run that ended too long ago says it expired."""
    if bridge.reads.ticket_expired(ticket):
        config = bridge.settings().bridge
        seconds = int(config.ticket_retention.total_seconds())
        return TicketExpiredError(
            f"ticket {ticket!r} ended too long ago: fleetd keeps an ended ticket for "
            f"{seconds} s and at most {config.tickets_kept} of them "
            "(bridge.ticketRetentionSeconds, bridge.ticketsKept)",
            hint={
                "expired": True,
                "replayed": False,
                "next": [
                    "a result no waiting fleet_send took was also put in your inbox: fleet_poll()"
                ],
            },
        )
    if bridge.runs.ended(run_of_ticket(ticket)):
        return UnknownTicketError(
            f"ticket {ticket!r} is from a previous run of fleetd: fleetd restarted, the results "
            "of that run are gone, and nothing was replayed",
            hint={
                "restarted": True,
                "resultsKept": False,
                "replayed": False,
                "next": [
                    "fleet_list() shows members of that run still running as orphaned, and "
                    "preserved worktrees",
                    "fleet_send(...) again if the task is still wanted",
                ],
            },
        )
    return UnknownTicketError(f"no ticket {ticket!r} for this lead in this run of fleetd")


def _message(record: InboxRecord) -> InboxMessage:
    """One drained record as the answer shows it: a field with nothing to say is absent."""
    optional = {
        "created_at_epoch_millis": record.created_at_epoch_millis,
        "ticket": record.ticket,
        "source": record.source,
        "severity": record.severity,
        "state": record.state,
        "subject_terminal": record.subject_terminal,
        "suggested_tool_calls": list(record.suggested_tool_calls)
        if record.suggested_tool_calls
        else None,
        "evidence": dict(record.evidence) if record.evidence else None,
    }
    return InboxMessage(
        msg_id=record.msg_id,
        kind=record.kind,
        target=record.target,
        content=record.content,
        **{name: value for name, value in optional.items() if value is not None},
    )
