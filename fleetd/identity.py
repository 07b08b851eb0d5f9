"""Who is calling: the role and name every fleet tool, the bridge and ``fleet_list`` reason about.

A domain value, not an api detail: the transports in ``api/`` build a :class:`Caller` from a bearer
token, and the runtime (``fleet_list``) and the bridge read it. It lives here, below both, so the
runtime never imports ``api``. ``fleetd.api.tools`` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Caller", "Role"]


class Role(StrEnum):
    """Who is calling: a planning lead, a delegated member, or a read-only operator."""

    LEAD = "lead"
    MEMBER = "member"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """An authenticated caller. Carries no credential."""

    role: Role
    name: str
    session_id: str | None = None
