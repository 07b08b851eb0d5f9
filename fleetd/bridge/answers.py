"""What the bridge answers a lead or a member, as the models that build it.

``fleet_send`` and ``fleet_poll`` with a ticket answer a :class:`TicketResult`, ``fleet_spawn`` and
``fleet_status`` a :class:`SessionRow`, ``fleet_stop`` a :class:`ReleaseResult`, ``fleet_reply`` a
:class:`ReplyResult`; ``fleet_list``'s capacity rows are :class:`CapacityRow`. Each answer is built
as its model and sent as that model's wire JSON: camelCase names, only the fields it was given
(``model_dump(mode="json", by_alias=True, exclude_unset=True)``, :func:`wire`), in the order the
model declares them. The same models are the tools' result contracts
(``contracts/api/<tool>.result.schema.json``, through :mod:`fleetd.api.results`), so the contract
and the bytes on the wire are one description.

A field that is *absent* when there is nothing to say is typed ``X | Absent`` (never ``null`` in
the schema, and no ``default``: a default of ``null`` on a field whose schema refuses null is an
invalid schema, which OpenAPI validators reject); a field that is always present but may be
unknown is ``X | None`` with no default. Models refuse unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from fleetd.bridge.release import ReleaseCause, WorktreeAction
from fleetd.bridge.sessions import SessionState
from fleetd.bridge.tasks import Delivery, ResultSource, Ticket, TicketOutcome

__all__ = [
    "Absent",
    "CapacityRow",
    "ModelHealthFlag",
    "OpenTurn",
    "ReleaseResult",
    "ReplyResult",
    "SessionRow",
    "TicketResult",
    "WireModel",
    "ticket_result",
    "wire",
]

#: Absent from the payload when there is nothing to say; the schema does not offer null.
Absent = SkipJsonSchema[None]


def _admits_null(schema: dict[str, Any]) -> bool:
    """Whether a property schema lets ``null`` through (a ``$ref``'d model never does)."""
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches: list[dict[str, Any]] = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    return any(_admits_null(branch) for branch in branches)


def _absent_has_no_default(schema: dict[str, Any]) -> None:
    """Drop ``default: null`` from every property whose schema refuses null (an ``Absent`` one):
    the field is simply not required, and the wire never carries that null."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None and not _admits_null(prop):
            del prop["default"]


class WireModel(BaseModel):
    """A closed wire object: camelCase names, unknown fields refused.

    :meth:`of` builds one without validation, for the rows a view of a thousand members builds
    on every version: what ``model_construct`` does, without its per-field Python loop (under
    half its time, about the time of validating; unlike validating, a view never refuses to show
    a row for a value its model did not foresee: the registry's check of the answer logs it). The
    caller gives every required field, each of its field's type, by field name; a field not
    given is unset (absent from :func:`wire`) and reads as its default.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        json_schema_extra=_absent_has_no_default,
    )

    @classmethod
    def of(cls, **fields: Any) -> Self:
        """A model of ``fields`` (by field name), unvalidated; see the class doc. A required field
        not given or a name the model does not have is a ``TypeError``."""
        shape = cls.__dict__.get("_wire_shape")
        if shape is None:
            # every field in the model's order: the serializer writes them in the order held
            template = {
                name: None if info.is_required() else info.get_default(call_default_factory=True)
                for name, info in cls.model_fields.items()
            }
            required = frozenset(n for n, info in cls.model_fields.items() if info.is_required())
            shape = (template, required, template.keys())
            type.__setattr__(cls, "_wire_shape", shape)
        template, required, names = shape
        given = fields.keys()
        if not required <= given <= names:
            missing, unknown = sorted(required - given), sorted(given - names)
            raise TypeError(f"{cls.__name__}: missing {missing}, unknown {unknown}")
        values = template.copy()
        values.update(fields)  # an existing key keeps its place
        model = cls.__new__(cls)
        _set = object.__setattr__
        _set(model, "__dict__", values)
        _set(model, "__pydantic_fields_set__", set(given))
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model


def wire(model: BaseModel) -> dict[str, Any]:
    """``model`` as the JSON object it stands for: camelCase, only the fields it was given."""
    document: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return document


class ModelHealthFlag(WireModel):
    """The member's profile has its model benched (its provider's catalog no longer lists it):
    the work is accepted all the same — a live member is never refused — and the lead decides
    (``fleet_list``'s ``dependencies.models`` says more)."""

    state: Literal["benched"]
    benched_until: str

    @classmethod
    def benched(cls, until: datetime) -> ModelHealthFlag:
        return cls.of(state="benched", benched_until=until.isoformat())


class TicketResult(WireModel):
    """A ticket (``fleet_send``, ``fleet_poll`` with ``ticket``): never the prompt.
    ``modelHealth`` is on a ``fleet_send`` answer while the target's model is benched."""

    ticket: str
    target: str
    status: TicketOutcome
    accepted_at: str
    delivered_at: str | Absent = None
    delivery: Delivery | Absent = None
    prompt_refusals: int | Absent = None
    resolved_at: str | None = None  # present once terminal; null only if no time was kept
    source: ResultSource | Absent = None
    content: str | Absent = None
    reason: str | Absent = None
    hint: str | Absent = None
    model_health: ModelHealthFlag | Absent = None


def ticket_result(ticket: Ticket, model_health: ModelHealthFlag | None = None) -> TicketResult:
    """The ticket as a tool result (the prompt never leaves); a field with nothing to say is
    absent, ``resolvedAt`` is present once the ticket is terminal."""
    fields: dict[str, Any] = {
        "ticket": ticket.ticket_id,
        "target": ticket.target,
        "status": ticket.outcome,
        "accepted_at": ticket.accepted_at.isoformat(),
    }
    if ticket.delivered_at is not None:
        fields["delivered_at"] = ticket.delivered_at.isoformat()
    if ticket.delivery is not None:
        fields["delivery"] = ticket.delivery
    if ticket.refusals:
        fields["prompt_refusals"] = ticket.refusals
    if ticket.terminal:
        fields["resolved_at"] = ticket.resolved_at.isoformat() if ticket.resolved_at else None
    if ticket.source is not None:
        fields["source"] = ticket.source
    if ticket.content is not None:
        fields["content"] = ticket.content
    if ticket.reason is not None:
        fields["reason"] = ticket.reason
    if ticket.hint is not None:
        fields["hint"] = ticket.hint
    if model_health is not None:
        fields["model_health"] = model_health
    return TicketResult.of(**fields)


class OpenTurn(WireModel):
    ticket: str
    turn: int
    delivery: Delivery | None
    delivered_age_seconds: float | None
    saw_working: bool
    baseline: str | None


class SessionRow(WireModel):
    """One member (``fleet_spawn``, ``fleet_status``): states, counts and ages, no pane text;
    ``modelHealth`` while the live member's profile has its model benched."""

    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    pane_id: str | None
    state: SessionState
    presence: bool
    turn: int
    live_status: str | None
    queued: int
    pending_tickets: list[str]
    state_age_seconds: float | None
    open_turn: OpenTurn | Absent = None
    idle_for_seconds: float | Absent = None
    released_cause: str | Absent = None
    model_health: ModelHealthFlag | Absent = None
    branch: str | Absent = None


class ReleaseResult(WireModel):
    """``fleet_stop``: how the member (or orphan) was released."""

    session_id: str
    cause: ReleaseCause
    already: bool | Absent = None
    orphaned: bool | Absent = None
    worktree: WorktreeAction | Absent = None


class ReplyResult(WireModel):
    """``fleet_reply``: the reply is stored for the lead; ``ticket`` is null for a second reply."""

    accepted: Literal[True]
    ticket: str | None
    late: bool


class CapacityRow(WireModel):
    """One profile's capacity; ``maxLoad`` and ``free`` are null for an uncapped profile.
    ``benched``: the profile's model is benched — ``free`` is 0 and placement refuses it until
    ``benchedUntil``. ``contextWindow`` is the effective one (the provider catalog's, else the
    configured one; ``contextWindowSource`` says which)."""

    profile: str
    max_load: int | None
    live: int
    free: int | None
    reclaimable: int
    orphaned: int
    benched: bool
    benched_until: str | None = None
    context_window: int | None = None
    context_window_source: Literal["catalog", "config"] | None = None
