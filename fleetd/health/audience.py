"""Which incidents a lead may see: one rule for ``fleet_list`` and for the incident journal's list.

A lead sees an incident

* that it owns or holds (the incident's owner or its recipient lead),
* that is about itself (a lead-scope incident whose subject it is: its own ``LEAD_UNREACHABLE``
  while a peer or a person holds it — the lead learns from it once it is back), or
* that is fleet-wide (the control link, a profile's model, a fleetd instance that is down): it
  bears on every lead's work.

Nothing else: another lead's members, and incidents about another lead that it does not hold,
stay out of its view. The operator sees every incident; who is the operator is the caller's role,
which the shell decides before asking this rule.

``fleet_list`` (:mod:`fleetd.runtime.fleet_view`) and the in-memory journal ask
:func:`lead_may_see`; the SQL journal states the same rule as its ``WHERE`` clause from
:data:`SELF_SCOPES` and :data:`FLEET_WIDE_SCOPES`, and one contract test runs the rule's cases
on every journal.
"""

from __future__ import annotations

from typing import Final

from fleetd.health.states import Scope

__all__ = ["FLEET_WIDE_SCOPES", "SELF_SCOPES", "lead_may_see"]

SELF_SCOPES: Final = frozenset({Scope.LEAD})
"""Scopes whose subject is a lead: the lead it names sees it."""

FLEET_WIDE_SCOPES: Final = frozenset({Scope.CONTROL_LINK, Scope.PROFILE, Scope.INSTANCE})
"""Scopes that bear on every lead: every lead sees them."""


def lead_may_see(
    lead: str, *, scope: str, subject: str, owner: str | None, recipient: str | None
) -> bool:
    """Whether lead ``lead`` may see an incident of ``scope`` about ``subject``, owned by
    ``owner`` and held by ``recipient`` (``scope`` is a :class:`Scope` or its value)."""
    if lead in (owner, recipient):
        return True
    if scope in SELF_SCOPES:
        return subject == lead
    return scope in FLEET_WIDE_SCOPES
