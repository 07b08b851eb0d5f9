"""``fleet_list``: the one view of the whole fleet.

It joins the control link, herdr's live agents (one ``agent.list``), the bridge's sessions and
capacity, the orphans a previous run left running (state ``orphaned``), the leads and their push
outcomes, inbox decode failures and the records held in memory for an unreachable inbox (counts),
the config status, the outbound dependencies (broker endpoints, model providers, benched
profiles; :mod:`fleetd.runtime.dependencies`) and — once the health monitor runs — member and lead
health, open incidents and ``healthCoverage``. It never carries pane content, prompts, replies,
tokens or URLs. Preserved worktrees (paths included) are shown to leads only. A lead sees its own
members, and of the inbox only its own key's decode failures and held records; the operator sees
the whole fleet.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetd.bridge.backlog import MemberBacklog, member_backlogs, read_lead_stats
from fleetd.bridge.manifests import load_manifests
from fleetd.bridge.orphans import ORPHANED, Orphan
from fleetd.bridge.push import PushLoop
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import Session
from fleetd.config import ConfigRef
from fleetd.errors import HerdrError
from fleetd.health.states import Scope
from fleetd.identity import Caller, Role
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.records import InboxRecord
from fleetd.runtime.dependencies import DependencyView
from fleetd.runtime.link import LinkState
from fleetd.runtime.monitor import FleetHealthMonitor

__all__ = ["FleetViewBuilder"]

VIEW_VERSION = 1


@dataclass(slots=True, kw_only=True)
class FleetViewBuilder:
    """Builds ``fleet_list`` for one caller."""

    bridge: Bridge
    link: LinkState
    config: ConfigRef
    push: PushLoop
    manifest_root: Path
    health: FleetHealthMonitor | None = None
    dependencies: DependencyView | None = None

    async def build(self, caller: Caller) -> dict[str, Any]:
        now = self.bridge.clock.now()
        statuses: dict[str, str] = {}
        try:
            agents = await self.bridge.control.list_agents()
            statuses = {a.name: a.agent_status.value for a in agents if a.name}
            live: list[dict[str, Any]] | None = [
                {
                    "name": a.name,
                    "paneId": a.pane_id,
                    "agent": a.agent,
                    "status": a.agent_status.value,
                }
                for a in sorted(agents, key=lambda a: (a.name or "", a.pane_id))
            ]
        except HerdrError:
            live = None
        visible = [
            s
            for s in self.bridge.sessions()
            if caller.role is Role.OPERATOR or s.owner == caller.name
        ]
        stats = await read_lead_stats(
            self.bridge.inbox, [lead.name for lead in self.config.current.leads]
        )
        backlogs = member_backlogs(stats, self.bridge.sessions())
        orphans = [
            o
            for o in self.bridge.orphans.members()
            if caller.role is Role.OPERATOR or o.mark.owner == caller.name
        ]
        if caller.role is Role.LEAD:
            seen = {s.name for s in visible} | {o.mark.name for o in orphans}
            seen |= {lead.agent for lead in self.config.current.leads}
            live = None if live is None else [a for a in live if a["name"] in seen]
        view: dict[str, Any] = {
            "version": VIEW_VERSION,
            "generatedAt": now.isoformat(),
            "controlLink": self.health.link_view(self.link) if self.health else self.link.view(),
            "agents": live,
            "members": [self._member(s, now, statuses, backlogs) for s in visible]
            + [_orphan(o, now, statuses) for o in orphans],
            "capacity": self.bridge.view.capacity_view(backlogs),
            "leads": self._leads(caller, statuses if live is not None else None),
            "inbox": self._inbox(caller),
            "teardownFailures": list(self.bridge.teardown_failures),
            "config": self._config_status(),
        }
        if self.health is not None:
            view.update(self.health.view())
            view["incidents"] = [i for i in view["incidents"] if _sees_incident(caller, i)]
        if self.dependencies is not None:  # outbound endpoints, providers, model benches
            view["dependencies"] = self.dependencies.view(now)
            self.dependencies.decorate_capacity(view["capacity"], now)
        if caller.role is Role.LEAD:
            view["preservedWorktrees"] = self._preserved(caller.name)
        return view

    def inbox_component(self) -> dict[str, Any]:
        """The nested ``inbox`` component of ``/healthz``: counts only, never content.

        ``fail`` while the inbox is known to be unreachable (replies are refused, polls answer
        ``inbox_unavailable``); ``warn`` while a record waits in memory for the inbox (a kill
        would lose it) or an entry could not be decoded.
        """
        held = self._held(self.bridge.unpublished)
        failures = self.bridge.inbox.failures()
        reachable = self.bridge.inbox.reachable()
        status = "fail" if not reachable else "warn" if held["records"] or failures else "pass"
        return {
            "status": status,
            "reachable": reachable,
            "backend": self.config.current.inbox.backend.value,
            "heldInMemory": held,
            "decodeFailures": len(failures),
        }

    def _inbox(self, caller: Caller) -> dict[str, Any]:
        """Reachability, decode failures and records held in memory. A lead's figures are its
        own key's (another lead's counts are theirs to see); the operator sees every key."""
        failures = self.bridge.inbox.failures()
        held = self.bridge.unpublished
        if caller.role is not Role.OPERATOR:
            failures = [f for f in failures if f.key == caller.name]
            held = [r for r in held if r.recipient_lead == caller.name]
        return {
            "reachable": self.bridge.inbox.reachable(),
            "failures": [_failure(f) for f in failures],
            "heldInMemory": self._held(held),
        }

    def _held(self, held: list[InboxRecord]) -> dict[str, Any]:
        """Records accepted for a lead that the inbox has not taken yet (they live in memory).

        ``gaveWay`` counts the records that gave way to the bound, which all leads share.
        """
        created = [r.created_at_epoch_millis for r in held if r.created_at_epoch_millis]
        return {
            "records": len(held),
            "byLead": dict(sorted(Counter(r.recipient_lead for r in held).items())),
            "byKind": dict(sorted(Counter(r.kind.value for r in held).items())),
            "oldestCreatedEpochMillis": min(created) if created else None,
            "gaveWay": self.bridge.held_dropped,
        }

    def _member(
        self,
        session: Session,
        now: datetime,
        statuses: dict[str, str],
        backlogs: dict[str, MemberBacklog],
    ) -> dict[str, Any]:
        row = self.bridge.view.session_row(
            session, now=now, backlog=backlogs.get(session.session_id)
        )
        if session.live and session.name in statuses:
            row["liveStatus"] = statuses[session.name]  # this view's own agent.list
        if self.health is not None:
            row["health"] = self.health.member_health(session.session_id)
        return row

    def _leads(self, caller: Caller, statuses: dict[str, str] | None) -> list[dict[str, Any]]:
        """Every configured lead; a lead sees its own push and inbox counts and the foreign
        incidents it holds, of a peer only its name, agent, herdr status and health with the
        count of foreign incidents it holds (what peer routing weighs, §7.4).

        ``liveStatus`` is the lead's status in this view's own agent list (None for a lead herdr
        does not list: a dead lead never shows the last status the push loop read); only when
        that list failed (``statuses`` None) is it the push loop's last read."""
        rows = []
        for lead in self.config.current.leads:
            outcome = self.push.outcomes.get(lead.name)
            last_read = outcome.last_status if outcome else None
            row: dict[str, Any] = {
                "name": lead.name,
                "agent": lead.agent,
                "liveStatus": last_read if statuses is None else statuses.get(lead.agent),
            }
            own = caller.role is Role.OPERATOR or caller.name == lead.name
            if own:
                row["inboxDepth"] = outcome.depth if outcome else None
                row["nudgesForHead"] = outcome.nudges_for_head if outcome else 0
                row["nudgeCapReached"] = bool(outcome and outcome.cap_reached_at)
            if self.health is not None:
                health = self.health.lead_health(lead.name)
                if health is not None and not own:
                    health.pop("foreignIncidents")  # a peer sees the count, not the incidents
                row["health"] = health
            rows.append(row)
        return rows

    def _config_status(self) -> dict[str, Any]:
        status = self.config.status
        return {
            "loadedAt": status.loaded_at.isoformat(),
            "lastReloadErrorKey": status.last_error_key,
            "lastReloadErrorReason": status.last_error_reason,
            "pendingRestartKeys": list(status.pending_restart_keys),
            "reloadFailures": status.reload_failures,
        }

    def _preserved(self, lead: str) -> list[dict[str, Any]]:
        result = load_manifests(self.manifest_root)
        return [
            {
                "sessionId": m.session_id,
                "role": m.role,
                "profile": m.profile,
                "repository": m.repository,
                "path": m.path,
                "branch": m.branch,
                "baseCommit": m.base_commit,
                "cause": m.cause.value,
                "releasedAt": m.released_at.isoformat(),
                "state": m.state,
                "pendingTaskIds": list(m.pending_task_ids),
            }
            for m in result.manifests
            if m.owner == lead
        ]


def _orphan(orphan: Orphan, now: datetime, statuses: dict[str, str]) -> dict[str, Any]:
    """A member of a previous run that still runs: nothing to send it, only to stop it."""
    mark = orphan.mark
    row: dict[str, Any] = {
        "sessionId": mark.session_id,
        "name": mark.name,
        "profile": mark.profile,
        "kind": mark.kind,
        "role": mark.role,
        "owner": mark.owner,
        "paneId": mark.pane_id,
        "state": ORPHANED,
        "run": mark.run,
        "liveStatus": statuses.get(mark.name),
        "orphanedForSeconds": round((now - orphan.found_at).total_seconds(), 3),
        "suggestedToolCalls": [f'fleet_stop(paneId="{mark.pane_id}")'],
    }
    if mark.worktree is not None:
        row["branch"] = mark.worktree.branch
    return row


def _sees_incident(caller: Caller, row: dict[str, Any]) -> bool:
    """The operator sees every incident; a lead those it owns, receives or is the subject of,
    and the fleet-wide ones (control link, profile) that bear on every lead."""
    if caller.role is Role.OPERATOR:
        return True
    if caller.name in (row["owner"], row["recipient"]):
        return True
    if row["scope"] == Scope.LEAD.value:
        return bool(row["subject"] == caller.name)
    return row["scope"] in _FLEET_WIDE


_FLEET_WIDE = frozenset({Scope.CONTROL_LINK.value, Scope.PROFILE.value})


def _failure(failure: DecodeFailure) -> dict[str, Any]:
    """A decode failure, summarised: no body, no content."""
    return {
        "key": failure.key,
        "reason": failure.reason.value,
        "disposition": failure.disposition.value,
        "messageId": failure.message_id,
        "version": failure.version,
        "occurrences": failure.occurrences,
        "lastSeenEpochMillis": failure.last_seen_epoch_millis,
    }
