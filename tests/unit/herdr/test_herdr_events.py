"""Subscriptions and pushed events in both of herdr's naming styles."""

from __future__ import annotations

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.sim.events import AgentStatusChanged, HerdrEvent, Subscription, parse_event


def test_global_event_uses_snake_case_name_and_tagged_data() -> None:
    """`{"event":"pane_exited","data":{"type":"pane_exited",...}}` parses to a HerdrEvent."""
    event = parse_event(
        {"event": "pane_exited", "data": {"type": "pane_exited", "pane_id": "w1:p2",
                                           "workspace_id": "w1"}}
    )  # fmt: skip
    assert event == HerdrEvent(kind="pane_exited", workspace_id="w1", pane_id="w1:p2")


def test_pane_scoped_event_uses_dotted_name_and_untagged_data() -> None:
    """`pane.agent_status_changed` parses to AgentStatusChanged; unknown status -> UNKNOWN."""
    event = parse_event(
        {"event": "pane.agent_status_changed",
         "data": {"pane_id": "w1:p2", "workspace_id": "w1", "agent_status": "napping",
                  "agent": "codex"}}
    )  # fmt: skip
    assert isinstance(event, AgentStatusChanged)
    assert event.agent_status is AgentStatus.UNKNOWN
    assert event.agent == "codex"


def test_ids_are_lifted_from_nested_objects() -> None:
    """pane_created carries its ids inside `pane`; they are lifted to the event."""
    event = parse_event(
        {"event": "pane_created",
         "data": {"type": "pane_created",
                  "pane": {"pane_id": "w2:p1", "workspace_id": "w2", "tab_id": "w2:t1"}}}
    )  # fmt: skip
    assert isinstance(event, HerdrEvent)
    assert (event.pane_id, event.workspace_id, event.tab_id) == ("w2:p1", "w2", "w2:t1")


def test_agent_detected_release_carries_final_status() -> None:
    """pane_agent_detected's final_status becomes the event's agent_status."""
    event = parse_event(
        {"event": "pane_agent_detected",
         "data": {"type": "pane_agent_detected", "pane_id": "w1:p1", "workspace_id": "w1",
                  "released": True, "final_status": "done"}}
    )  # fmt: skip
    assert isinstance(event, HerdrEvent)
    assert event.agent_status is AgentStatus.DONE


def test_unknown_event_kind_is_kept_generic() -> None:
    """A kind from a newer herdr is passed through as a generic event."""
    event = parse_event({"event": "pane.something_new", "data": {"pane_id": "w1:p1"}})
    assert isinstance(event, HerdrEvent)
    assert event.kind == "pane.something_new"


def test_subscription_wire_shapes() -> None:
    """Global kinds send only `type`; pane-scoped ones add pane_id and an optional filter."""
    assert Subscription.lifecycle("pane.exited").to_wire() == {"type": "pane.exited"}
    assert Subscription.status_changes("w1:p1", AgentStatus.DONE).to_wire() == {
        "type": "pane.agent_status_changed",
        "pane_id": "w1:p1",
        "agent_status": "done",
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"type": "pane.agent_status_changed"},
        {"type": "pane.exited", "pane_id": "w1:p1"},
        {"type": "pane_exited"},
        {"type": "pane.scroll_changed", "pane_id": "w1:p1", "agent_status": AgentStatus.IDLE},
    ],
)
def test_invalid_subscriptions_are_refused(kwargs: dict[str, object]) -> None:
    """A pane-scoped kind without pane, a global with params, or a snake_case type is refused."""
    with pytest.raises(ValueError, match=r"."):
        Subscription(**kwargs)  # type: ignore[arg-type]
