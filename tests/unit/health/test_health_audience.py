"""Which incidents a lead may see, as one table: owner, recipient, itself, fleet-wide, else not."""

from __future__ import annotations

import pytest

from fleetd.health.audience import FLEET_WIDE_SCOPES, SELF_SCOPES, lead_may_see
from fleetd.health.states import Scope

CASES = [
    # (scope, subject, owner, recipient, may "lead" see it?)
    (Scope.MEMBER, "sess_1", "lead", "lead", True),  # its own member, held by itself
    (Scope.MEMBER, "sess_1", "lead", None, True),  # its own member, with a person
    (Scope.MEMBER, "sess_1", "lead-b", "lead", True),  # held for a failed peer
    (Scope.MEMBER, "sess_1", "lead-b", "lead-b", False),  # a peer's member
    (Scope.MEMBER, "sess_1", None, None, False),  # nobody's member, with a person
    (Scope.LEAD, "lead", None, "lead-b", True),  # about itself, a peer holds it
    (Scope.LEAD, "lead", None, None, True),  # about itself, a person holds it
    (Scope.LEAD, "lead-b", None, "lead", True),  # about a peer, it holds it
    (Scope.LEAD, "lead-b", None, "lead-c", False),  # about a peer, another holds it
    (Scope.CONTROL_LINK, "herdr", None, None, True),  # fleet-wide
    (Scope.PROFILE, "sonnet", None, "lead-b", True),  # fleet-wide
    (Scope.INBOX, "lead-b", "lead-b", "lead-b", False),  # a peer's inbox key
    (Scope.INBOX, "lead", "lead", "lead", True),  # its own inbox key
    (Scope.INSTANCE, "host-b", None, None, True),  # fleet-wide: a fleetd instance is down
]


@pytest.mark.parametrize(("scope", "subject", "owner", "recipient", "seen"), CASES)
def test_a_lead_sees_what_it_owns_holds_is_about_it_or_is_fleet_wide(
    scope: Scope, subject: str, owner: str | None, recipient: str | None, seen: bool
) -> None:
    """Each row of the rule, for the lead named "lead"; the scope's value reads the same."""
    found = lead_may_see("lead", scope=scope, subject=subject, owner=owner, recipient=recipient)
    assert found is seen
    by_value = lead_may_see(
        "lead", scope=scope.value, subject=subject, owner=owner, recipient=recipient
    )
    assert by_value is seen


def test_every_scope_has_a_row_and_no_scope_is_both_self_and_fleet_wide() -> None:
    """The table covers every scope, and a scope is about one lead or about all, not both."""
    assert {row[0] for row in CASES} == set(Scope)
    assert not SELF_SCOPES & FLEET_WIDE_SCOPES
