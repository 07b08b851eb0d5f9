"""The one error tree of fleetd.

::

    FleetdError
    ├── ConfigError                 a config key is unknown, malformed or out of range (``key``)
    ├── HerdrError                  herdr answered with an error frame (``code``, ``message``)
    │   ├── TargetNotFoundError     any ``*_not_found`` code: the pane/agent/workspace is gone
    │   ├── InvalidResponseError    its result cannot be read (``invalid_response``)
    │   └── ControlLinkError        refused, reset, timed out, ``server_unavailable``: link is down
    │                               (``cause``: a bounded :class:`LinkCause`)
    ├── InboxError                  the reply inbox could not publish, collect or own a key
    │   ├── InboxUnavailableError   the broker is unreachable
    │   │   └── InboxFullError      one key holds as many entries as it may (in memory)
    │   ├── InboxOwnershipError     a key was used without being owned
    │   └── DecodeError             one stored message cannot be decoded (``reason``)
    ├── ToolError                   a fleet tool call failed in a way the caller can see
    │   ├── AuthError               missing or bad bearer token (401)
    │   ├── PermissionDeniedError   authenticated, not allowed (403)
    │   ├── InvalidArgumentsError   arguments do not match the tool's schema (``hint``)
    │   ├── UnknownTargetError      the target is not a live session (``hint``: live members)
    │   ├── UnknownTicketError      no such ticket in this run (``hint``: if of a previous run)
    │   ├── UnknownToolError        no such tool (``hint``: the tool names)
    │   ├── CapacityError           placement refused: the profile is at ``maxLoad``
    │   ├── ProfileBenchedError     placement refused: the provider no longer lists the model
    │   ├── ConflictError           the session's state forbids the call
    │   │   └── NoOpenTaskError     ``fleet_reply`` from a member with no task to answer (``hint``)
    │   └── UnavailableError        a dependency (herdr, the broker) cannot be reached now
    │       └── InboxRetryError     the inbox cannot store or hand out now; nothing changed, retry
    ├── JournalError                the incident journal failed (``operation``, ``reason``)
    │   ├── JournalUnavailableError the database cannot be reached or written now (down, full)
    │   ├── JournalSchemaError      the database is not at the code's schema: run ``fleetd migrate``
    │   └── JournalRefusedError     a record breaks the journal's rules; nothing was written
    ├── IllegalTransitionError      a state machine was asked for a transition it does not have
    └── WorktreeError               git could not provision, inspect or remove a worktree
        └── ManifestError           a preserved-worktree manifest could not be written

Adapters translate foreign exceptions (``OSError``, ``aiormq`` errors, ``httpx`` errors) into this
tree at their boundary, once. Errors carry structured fields; their text never includes secrets,
pane text or raw foreign exception messages that could leak them.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "AuthError",
    "CapacityError",
    "ConfigError",
    "ConflictError",
    "ControlLinkError",
    "DecodeError",
    "FleetdError",
    "HerdrError",
    "IllegalTransitionError",
    "InboxError",
    "InboxFullError",
    "InboxOwnershipError",
    "InboxRetryError",
    "InboxUnavailableError",
    "InvalidArgumentsError",
    "InvalidResponseError",
    "JournalError",
    "JournalRefusedError",
    "JournalSchemaError",
    "JournalUnavailableError",
    "LinkCause",
    "ManifestError",
    "NoOpenTaskError",
    "PermissionDeniedError",
    "ProfileBenchedError",
    "StateStoreError",
    "TargetNotFoundError",
    "TicketExpiredError",
    "ToolError",
    "UnavailableError",
    "UnknownTargetError",
    "UnknownTicketError",
    "UnknownToolError",
    "WorktreeError",
]


class FleetdError(Exception):
    """Base of every error fleetd raises on purpose."""


class ConfigError(FleetdError):
    """A configuration value is unknown, malformed or out of range."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class HerdrError(FleetdError):
    """herdr answered a request with an error frame."""

    def __init__(self, code: str, message: str = "", *, method: str = "") -> None:
        super().__init__(f"{method or 'herdr'}: {code}" + (f" ({message})" if message else ""))
        self.code = code
        self.message = message
        self.method = method


class TargetNotFoundError(HerdrError):
    """A ``*_not_found`` answer: the target is gone while the link itself works."""


class InvalidResponseError(HerdrError):
    """herdr answered this request, but fleetd cannot read the result (code ``invalid_response``).

    The request reached herdr and was acted on or not: for a call with an effect (``agent.prompt``)
    the effect is unknown, never to be assumed absent.
    """


class LinkCause(StrEnum):
    """Why the link to herdr failed, as a bounded class an operator can read in a log (never the
    foreign exception's text)."""

    TIMEOUT = "timeout"  # the connect or the answer missed its deadline
    REFUSED = "refused"  # nothing accepted the connection on the socket
    SOCKET_MISSING = "socket_missing"  # no socket file at the configured path
    PERMISSION = "permission"  # the socket exists but may not be opened
    RESET = "reset"  # the connection broke off mid-exchange
    CLOSED = "closed"  # herdr closed the connection before answering
    TOO_LARGE = "too_large"  # the answer exceeded the read limit
    SERVER_UNAVAILABLE = "server_unavailable"  # herdr answered that it cannot serve
    INVALID_RESPONSE = "invalid_response"  # the answer was not a readable response
    OTHER = "other"


#: The cause a link error's code implies when its raiser did not name a finer one.
_CAUSE_OF_CODE = {
    "connect_timeout": LinkCause.TIMEOUT,
    "request_timeout": LinkCause.TIMEOUT,
    "connect_failed": LinkCause.REFUSED,
    "connection_lost": LinkCause.RESET,
    "response_too_large": LinkCause.TOO_LARGE,
    "server_unavailable": LinkCause.SERVER_UNAVAILABLE,
    "invalid_response": LinkCause.INVALID_RESPONSE,
}


class ControlLinkError(HerdrError):
    """The link to herdr failed: refused, reset, timed out, or ``server_unavailable``.

    ``cause`` is the bounded class of the failure (:class:`LinkCause`): the raiser names it when
    it knows the foreign error (a refused connect, a missing socket, a reset), else the ``code``
    implies it.
    """

    def __init__(
        self, code: str, message: str = "", *, method: str = "", cause: LinkCause | None = None
    ) -> None:
        super().__init__(code, message, method=method)
        self.cause = cause or _CAUSE_OF_CODE.get(code, LinkCause.OTHER)


class InboxError(FleetdError):
    """The reply inbox failed."""


class InboxUnavailableError(InboxError):
    """The inbox backend cannot be reached."""


class InboxFullError(InboxUnavailableError):
    """One key holds as many entries as it may (the in-memory inbox's bound); others take more."""


class InboxOwnershipError(InboxError):
    """A key was published to or collected from without being owned."""


class DecodeError(InboxError):
    """One stored inbox message cannot be decoded."""

    def __init__(self, reason: str, *, detail: str = "") -> None:
        super().__init__(reason + (f": {detail}" if detail else ""))
        self.reason = reason
        self.detail = detail


class ToolError(FleetdError):
    """A fleet tool failed; the caller sees ``code``, ``message`` and an optional ``hint``."""

    status = 400
    code = "tool_error"

    def __init__(self, message: str, *, hint: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class AuthError(ToolError):
    status = 401
    code = "unauthenticated"


class PermissionDeniedError(ToolError):
    status = 403
    code = "forbidden"


class InvalidArgumentsError(ToolError):
    """Arguments the tool cannot take: ``path`` names the field (empty: the whole call), ``rule``
    the rule it broke. The tool registry answers with the params schema and this one error."""

    status = 422
    code = "invalid_arguments"

    def __init__(
        self, message: str, *, path: str = "", rule: str = "invalid_value", hint: Any = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.rule = rule

    def field_error(self) -> dict[str, str]:
        """The error as the ``invalid_arguments`` hint lists it: ``{path, type, message}``."""
        return {"path": self.path, "type": self.rule, "message": self.message}


class UnknownTargetError(ToolError):
    status = 404
    code = "unknown_target"


class UnknownTicketError(ToolError):
    status = 404
    code = "unknown_ticket"


class TicketExpiredError(UnknownTicketError):
    """A ticket this run issued whose ended record is no longer kept (see ``ticketsKept``)."""

    code = "ticket_expired"


class UnknownToolError(ToolError):
    status = 404
    code = "unknown_tool"


class CapacityError(ToolError):
    status = 409
    code = "capacity_exceeded"


class ProfileBenchedError(ToolError):
    """Placement refused: the profile's provider no longer lists its model (Model health), so
    the profile is benched until ``until``. The hint names the profiles that can take the work
    now (not benched, with a free slot); fleetd never moves the work to one of them itself."""

    status = 409
    code = "profile_benched"

    def __init__(
        self,
        message: str,
        *,
        profile: str,
        model: str,
        provider: str | None,
        until: datetime,
        now: datetime,
        profiles: list[str],
    ) -> None:
        wait = max(1, math.ceil((until - now).total_seconds()))
        super().__init__(
            message,
            hint={
                "profile": profile,
                "model": model,
                "provider": provider,
                "reason": "model_unavailable",
                "benchedUntil": until.isoformat(),
                "retryAfterSeconds": wait,
                "profiles": profiles,
            },
        )
        self.profile = profile
        self.until = until


class ConflictError(ToolError):
    status = 409
    code = "conflict"


class NoOpenTaskError(ConflictError):
    """A member replied with no delivered task open (``hint``: its last ticket, if any)."""

    code = "no_open_task"


class UnavailableError(ToolError):
    status = 503
    code = "unavailable"


class InboxRetryError(UnavailableError):
    """The reply inbox could not take or hand out a record; the call changed nothing.

    The hint says so in a form a model can act on: ``retryable``, how long to wait, and what
    became of the caller's data.
    """

    code = "inbox_unavailable"

    def __init__(self, message: str, *, action: str, retry_after_seconds: int = 5) -> None:
        super().__init__(
            message,
            hint={"retryable": True, "retryAfterSeconds": retry_after_seconds, "action": action},
        )


class JournalError(FleetdError):
    """The incident journal could not do ``operation``; ``reason`` is a bounded word.

    ``str()`` shows only ``operation: reason``. The database's own message (which can quote SQL
    parameters, hence payloads or a URL) is never kept; ``code`` is its error code when it has
    one (``SQLITE_FULL``, SQLSTATE ``53100``), for local logs. A caller turns any of these into
    notification coverage ``degraded``; detection goes on without the journal.
    """

    def __init__(self, operation: str, reason: str, *, code: str | None = None) -> None:
        super().__init__(f"{operation}: {reason}")
        self.operation = operation
        self.reason = reason
        self.code = code


class JournalUnavailableError(JournalError):
    """The database cannot be reached or written now (down, locked, disk full, I/O error)."""


class JournalSchemaError(JournalError):
    """The database schema is missing or not the code's migration head (run ``fleetd migrate``)."""


class JournalRefusedError(JournalError):
    """A record breaks the journal's rules (a second open incident for one key, a payload that
    could carry content); the transaction wrote nothing."""


class StateStoreError(FleetdError):
    """The bridge's state store could not do ``operation``; ``reason`` is a bounded word
    (``unavailable``, ``corrupt``, ``newer_schema``, ``locked``, ``closed`` ...). Like a journal
    error, ``str()`` shows only ``operation: reason``; the database's message is never kept."""

    def __init__(self, operation: str, reason: str, *, detail: str | None = None) -> None:
        super().__init__(f"{operation}: {reason}" + (f" ({detail})" if detail else ""))
        self.operation = operation
        self.reason = reason


class IllegalTransitionError(FleetdError):
    """A state machine refused a transition; its state is unchanged."""

    def __init__(self, machine: str, state: str, event: str) -> None:
        super().__init__(f"{machine}: no transition from {state} on {event}")
        self.machine = machine
        self.state = state
        self.event = event


class WorktreeError(FleetdError):
    """git could not provision, inspect or remove a worktree.

    ``operation`` and ``reason`` are bounded words and are all that ``str()`` shows. ``detail``
    (git's stderr, which may name paths) stays on the exception for local logs and never goes out.
    """

    def __init__(
        self,
        operation: str = "worktree",
        reason: str = "failed",
        *,
        detail: str = "",
        returncode: int | None = None,
    ) -> None:
        super().__init__(f"{operation}: {reason}")
        self.operation = operation
        self.reason = reason
        self.detail = detail
        self.returncode = returncode


class ManifestError(WorktreeError):
    """A preserved-worktree manifest could not be written; the worktree stays preserved."""
