"""``WireModel.of``: the unvalidated build the fleet view's rows use gives the validated bytes."""

from __future__ import annotations

import pytest

from fleetd.bridge import Delivery
from fleetd.bridge.answers import OpenTurn, SessionRow, wire
from fleetd.bridge.sessions import SessionState

FIELDS = {
    "session_id": "s-1",
    "name": "sonnet-1",
    "profile": "sonnet",
    "kind": "claude",
    "role": None,
    "owner": "lead",
    "pane_id": "w1:p1",
    "state": SessionState.BUSY,
    "presence": True,
    "turn": 2,
    "live_status": "working",
    "queued": 1,
    "pending_tickets": ["t1"],
    "state_age_seconds": 1.5,
}


def test_a_row_built_unvalidated_is_the_validated_row_field_for_field() -> None:
    """Given fields out of order, with optional ones left out, ``of`` gives the same wire JSON —
    same keys, same order (the model's), nothing unset — as the validated constructor."""
    turn = {
        "ticket": "t1",
        "turn": 2,
        "delivery": Delivery.CONFIRMED,
        "delivered_age_seconds": 0.5,
        "saw_working": True,
        "baseline": None,
    }
    given = {"branch": "fleetd/b", "open_turn": OpenTurn.of(**turn), **FIELDS}
    built = SessionRow.of(**given)
    checked = SessionRow(**{**given, "open_turn": OpenTurn(**turn)})
    assert list(wire(built)) == list(wire(checked))
    assert wire(built) == wire(checked)
    assert list(wire(built))[-2:] == ["openTurn", "branch"]
    assert built.model_health is None  # unset: reads as its default, absent on the wire
    assert "modelHealth" not in wire(built)


def test_a_missing_or_unknown_field_is_refused() -> None:
    """``of`` does not validate types, but a required field left out or a name the model does
    not have is an error, not a silently different answer."""
    with pytest.raises(TypeError, match="missing"):
        SessionRow.of(**{k: v for k, v in FIELDS.items() if k != "owner"})
    with pytest.raises(TypeError, match=r"unknown \['ownr'\]"):
        SessionRow.of(**FIELDS, ownr="lead")
