"""The terminal's screens, as pure functions of fleetd's JSON (``fleet_list`` and
``GET /v1/incidents`` results) to lines of :class:`rich.text.Text`.

Every line is cut to the screen's width, and a screen never has more lines than its height:
the sections (leads, members, incidents) share what is left after the header, the longest one
giving up rows first, and a section that lost rows ends with ``+N more``. ``fleetd status``
prints these lines, ``fleetd top`` shows them in a textual app, ``fleetd incidents`` prints the
incident screen.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text

from fleetd.text import INVISIBLE

__all__ = [
    "SHORT_ID",
    "Section",
    "age",
    "fit",
    "fleet_all_screen",
    "fleet_screen",
    "identity",
    "incident_screen",
    "short_id",
]

SHORT_ID = 12
"""Characters of an incident id shown on a screen (``inc_`` and 8 hex digits)."""

_HEALTHY_LEADS = frozenset({"LEAD_IDLE", "LEAD_WORKING"})
_QUIET_MEMBERS = frozenset({"IDLE", "WORKING", "STARTING"})


def age(seconds: float | None) -> str:
    """``45s``, ``2m31s``, ``1h05m``, ``3d04h``; ``-`` for no age."""
    if seconds is None:
        return "-"
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    if total < 86400:
        return f"{total // 3600}h{total % 3600 // 60:02d}m"
    return f"{total // 86400}d{total % 86400 // 3600:02d}h"


def short_id(incident_id: str) -> str:
    return incident_id[:SHORT_ID]


def identity(whoami: Mapping[str, Any]) -> str:
    """Who is asking, from fleetd's ``GET /v1/whoami`` result: ``operator``, or ``lead NAME``."""
    if whoami.get("role") == "lead":
        return f"lead {whoami.get('lead')}"
    return str(whoami.get("role", "?"))


@dataclass(frozen=True, slots=True)
class Section:
    """A titled block of rows; ``more`` says how its cut is worded."""

    title: Text
    rows: Sequence[Text]
    empty: str = "none"


#: Characters a terminal would act on instead of showing — C0 (ESC among them), DEL and C1 — and
#: the invisible ones that reorder or hide what follows (bidi overrides and isolates, line and
#: paragraph separators, zero-width space, word joiners, the byte-order mark).
_CONTROL = re.compile(f"[{INVISIBLE}]")


def _cut(line: Text, width: int) -> Text:
    """``line`` cut to ``width`` columns, every control character shown as ``?``: text from the
    service (a role, a name, a message) never drives the operator's terminal."""
    line = line.copy()
    if _CONTROL.search(line.plain):
        line.plain = _CONTROL.sub("?", line.plain)  # one for one: the styles keep their places
    line.truncate(width, overflow="ellipsis")
    line.rstrip_end(width)
    return line


def _allot(sizes: Sequence[int], budget: int) -> list[int]:
    """Rows each section shows within ``budget`` lines of rows (a cut section spends one of
    its lines on ``+N more``): the largest shown count gives up a row until all fit."""
    shown = list(sizes)

    def lines() -> int:
        return sum(max(1, s + (1 if s < size else 0)) for s, size in zip(shown, sizes, strict=True))

    while lines() > budget and any(shown):
        largest = max(range(len(shown)), key=lambda i: (shown[i], i))
        shown[largest] -= 1
    return shown


def fit(
    head: Sequence[Text], sections: Sequence[Section], *, width: int, height: int
) -> list[Text]:
    """The header, then each section (title and the rows that fit), cut to ``width`` columns
    and at most ``height`` lines."""
    budget = height - len(head) - len(sections)
    shown = _allot([len(s.rows) for s in sections], max(budget, 0))
    out = list(head)
    for section, count in zip(sections, shown, strict=True):
        out.append(section.title)
        if not section.rows:
            out.append(Text(f"  {section.empty}", style="dim"))
            continue
        out.extend(section.rows[:count])
        if count < len(section.rows):
            out.append(Text(f"  +{len(section.rows) - count} more", style="dim"))
    return [_cut(line, width) for line in out[: max(height, 0)]]


def _row(*cells: tuple[str, int, str]) -> Text:
    """A row of cells (text, width, style); a width of 0 takes the text as it is."""
    line = Text("  ")
    for text, size, style in cells:
        cell = text if size == 0 else (text[: size - 1] + "…" if len(text) > size else text)
        line.append(cell.ljust(size) if size else cell, style=style)
        line.append(" ")
    line.rstrip()
    return line


def _state_style(state: str | None, quiet: frozenset[str]) -> str:
    if not state:
        return "dim"
    return "green" if state in quiet else "bold red"


def _title(text: str, right: str = "") -> Text:
    line = Text(text, style="bold")
    if right:
        line.append("  " + right, style="dim")
    return line


def _coverage(fleet: Mapping[str, Any]) -> Text:
    """Control link, inbox, journal and sink in one line."""
    link = fleet.get("controlLink") or {}
    link_state = str(link.get("state", "unknown"))
    coverage = fleet.get("healthCoverage") or {}
    reason = str(coverage.get("reason") or "")
    health_on = coverage.get("detection") == "enabled"
    deps = fleet.get("dependencies") or {}
    inbox = fleet.get("inbox") or {}
    inbox_kind = str((deps.get("inbox") or {}).get("kind") or "inbox")
    webhook = deps.get("webhook") or {}
    endpoints = webhook.get("endpoints") or []
    up = sum(1 for e in endpoints if e.get("reachable") is not False)
    line = Text()

    def part(label: str, value: str, good: bool) -> None:
        if line:
            line.append(" · ", style="dim")
        line.append(f"{label} ")
        line.append(value, style="green" if good else "bold red")

    part("link", link_state, link_state == "up")
    reachable = inbox.get("reachable") is not False
    kind = "" if inbox_kind == "memory" else f"{inbox_kind} "
    part("inbox", f"{kind}{'ok' if reachable else 'down'}", reachable)
    if health_on:
        journal_ok = "journal failing" not in reason
        part("journal", "ok" if journal_ok else "failing", journal_ok)
    else:
        part("journal", "-", True)
    sink_kind = str(webhook.get("kind") or "disabled")
    if sink_kind != "disabled":
        sink_ok = f"{sink_kind} sink failing" not in reason and not webhook.get("allDown")
        part(sink_kind, f"{up}/{len(endpoints)} up", sink_ok)  # the sink, named by its kind
    else:
        part("sink", "off", True)
    status = str(coverage.get("status", "off"))
    part("coverage", status, status in ("full", "off", "partial"))
    return line


def _header(fleet: Mapping[str, Any], source: str, who: str) -> Text:
    line = Text("fleetd ", style="bold")
    line.append(source)
    line.append(f" as {who}", style="cyan")
    generated = str(fleet.get("generatedAt", ""))[11:19]
    line.append(f" · view {fleet.get('viewVersion', '-')} · {generated}Z", style="dim")
    return line


def _notice(notice: str, width: int) -> list[Text]:
    """A notice (fleetd unreachable, ...) on at most two lines of its own."""
    return [Text(part, style="bold yellow") for part in textwrap.wrap(notice, width)[:2]]


def _lead_rows(fleet: Mapping[str, Any], lead: str | None) -> list[Text]:
    rows = []
    for row in fleet.get("leads", []):
        health = row.get("health") or {}
        state = health.get("state")
        depth = row.get("inboxDepth")
        inbox = (
            "-" if depth is None else str(depth) + (" cap" if row.get("nudgeCapReached") else "")
        )
        holds = health.get("assignedForeignIncidents")
        name = str(row.get("name"))
        rows.append(
            _row(
                (("▸ " if name == lead else "") + name, 12, "bold" if name == lead else ""),
                (str(state or "-"), 20, _state_style(state, _HEALTHY_LEADS)),
                (f"herdr {row.get('liveStatus') or '-'}", 14, ""),
                (f"inbox {inbox}", 12, ""),
                (f"holds {holds}" if holds is not None else "", 0, ""),
            )
        )
    return rows


def _turn(member: Mapping[str, Any]) -> str:
    turn = member.get("openTurn")
    if isinstance(turn, Mapping):
        return f"#{turn.get('turn', member.get('turn'))} {age(turn.get('deliveredAgeSeconds'))}"
    return f"#{member.get('turn', 0)} -"


def _member_rows(fleet: Mapping[str, Any], lead: str | None) -> list[Text]:
    members = [m for m in fleet.get("members", []) if lead is None or m.get("owner") == lead]
    members.sort(key=lambda m: (str(m.get("owner")), str(m.get("name"))))
    rows = []
    previous = None
    for member in members:
        owner = str(member.get("owner"))
        health = (member.get("health") or {}).get("state")
        state = str(member.get("state"))
        orphan = state == "orphaned"
        rows.append(
            _row(
                ("" if owner == previous else owner, 8, "bold"),
                (str(member.get("name")), 14, ""),
                (state, 9, "bold red" if orphan or state == "failed" else ""),
                (str(health or "-"), 16, _state_style(health, _QUIET_MEMBERS)),
                ("-" if orphan else _turn(member), 10, ""),
                (f"q{member.get('queued', 0)}", 0, ""),
            )
        )
        previous = owner
    return rows


def _routed(incident: Mapping[str, Any]) -> tuple[str, str]:
    routing = incident.get("routing") or {}
    if routing.get("route") == "human":
        outcome = routing.get("outcome")
        return ("→ person" + (f" ({outcome})" if outcome else ""), "bold magenta")
    who = incident.get("recipient") or routing.get("recipient") or incident.get("owner")
    if who:
        return (f"→ {who}", "")
    return ("unrouted", "dim")


def _concerns(incident: Mapping[str, Any], lead: str) -> bool:
    routing = incident.get("routing") or {}
    named = (
        incident.get("owner"),
        incident.get("recipient"),
        incident.get("subject"),
        routing.get("recipient"),
        routing.get("owner"),
        routing.get("onBehalfOf"),
    )
    return lead in named


def _fleet_incident_rows(fleet: Mapping[str, Any], lead: str | None) -> list[Text]:
    names = {m.get("sessionId"): m.get("name") for m in fleet.get("members", [])}
    rows = []
    for incident in fleet.get("incidents", []):
        if lead is not None and not _concerns(incident, lead):
            continue
        routed, style = _routed(incident)
        severity = str(incident.get("severity"))
        rows.append(
            _row(
                (short_id(str(incident.get("id"))), SHORT_ID, "dim"),
                (str(incident.get("state")), 17, "bold red" if severity == "critical" else ""),
                (str(names.get(incident.get("subject")) or incident.get("subject")), 12, ""),
                (age(incident.get("ageSeconds")), 6, ""),
                (routed, 0, style),
            )
        )
    return rows


def fleet_screen(
    fleet: Mapping[str, Any],
    *,
    source: str,
    who: str,
    lead: str | None = None,
    notice: str = "",
    width: int = 80,
    height: int = 24,
) -> list[Text]:
    """``fleetd status`` (and ``top``'s main screen): who is asking (``who``, from
    :func:`identity`), coverage, leads with
    health and inbox, members by lead with state, health, turn age and queue, open incidents
    with routing. ``lead`` keeps the members and incidents that concern that lead."""
    members = _member_rows(fleet, lead)
    incidents = _fleet_incident_rows(fleet, lead)
    scope = f" of {lead}" if lead else " by lead"
    sections = [
        Section(_title(f"LEADS {len(fleet.get('leads', []))}"), _lead_rows(fleet, lead)),
        Section(
            _title(f"MEMBERS {len(members)}{scope}", "state · health · turn age · queue"),
            members,
        ),
        Section(_title(f"OPEN INCIDENTS {len(incidents)}", "routing"), incidents),
    ]
    head = [_header(fleet, source, who), *_notice(notice, width), _coverage(fleet)]
    return fit(head, sections, width=width, height=height)


def _troubled(member: Mapping[str, Any]) -> bool:
    health = (member.get("health") or {}).get("state")
    state = member.get("state")
    return state in ("failed", "orphaned") or (health is not None and health not in _QUIET_MEMBERS)


def _instance_title(part: Mapping[str, Any]) -> Text:
    """``INSTANCE name`` with its host, the age of its last renewal, and up or DOWN."""
    line = Text(f"INSTANCE {part.get('instance')}", style="bold")
    if part.get("answering"):
        line.append(" (answering)", style="cyan")
    line.append(f"  {part.get('host', '-')} · renewed {age(part.get('ageSeconds'))} ago · ")
    if part.get("down"):
        line.append("DOWN", style="bold red")
        line.append(" (stopped renewing: its last summary)", style="dim")
    else:
        line.append("up", style="green")
    return line


def _instance_rows(part: Mapping[str, Any], lead: str | None) -> list[Text]:
    """One instance's block: link and coverage, its leads, members by lead and those in
    trouble, open incidents with routing — from its own view or its published summary."""
    fleet = part.get("view") if part.get("answering") else part.get("summary")
    if not isinstance(fleet, Mapping):
        problem = part.get("summaryProblem") or "no summary"
        return [Text(f"  no summary to show ({problem})", style="yellow")]
    link = str((fleet.get("controlLink") or {}).get("state", "unknown"))
    coverage = str((fleet.get("healthCoverage") or {}).get("status", "off"))
    head = Text("  link ")
    head.append(link, style="green" if link == "up" else "bold red")
    head.append(" · coverage ")
    head.append(coverage, style="green" if coverage in ("full", "off", "partial") else "bold red")
    members = list(fleet.get("members", []))
    counts = fleet.get("membersByLead")
    if not isinstance(counts, Mapping):
        counts = {}
        for member in members:
            owner = str(member.get("owner"))
            counts[owner] = counts.get(owner, 0) + 1
    total = fleet.get("membersTotal", len(members))
    by_lead = " · ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    head.append(f" · members {total}" + (f": {by_lead}" if by_lead else ""))
    troubled = {**fleet, "members": [m for m in members if _troubled(m)]}
    incidents = _fleet_incident_rows(fleet, lead)
    rows = [head, *_lead_rows(fleet, lead), *_member_rows(troubled, lead), *incidents]
    left_out = int(fleet.get("membersLeftOut", 0)) + int(fleet.get("incidentsLeftOut", 0))
    if left_out:
        rows.append(Text(f"  {left_out} rows left out of its summary", style="dim"))
    return rows


def fleet_all_screen(
    document: Mapping[str, Any],
    *,
    source: str,
    who: str,
    lead: str | None = None,
    notice: str = "",
    width: int = 80,
    height: int = 24,
) -> list[Text]:
    """``fleetd status --all`` (and ``top --all``): one block per fleetd sharing the journal
    (``GET /v1/fleet?scope=all``), the answering one first, each with the age of its last
    renewal, a down one marked ``DOWN`` with its last summary; members are counted by lead and
    only those in trouble listed."""
    parts = list(document.get("instances", []))
    line = Text("fleetd ", style="bold")
    line.append(source)
    line.append(f" as {who}", style="cyan")
    line.append(f" · {len(parts)} instances · {document.get('live', 0)} up · ", style="dim")
    down = int(document.get("down", 0))
    line.append(f"{down} down", style="bold red" if down else "dim")
    head = [line, *_notice(notice, width)]
    note = document.get("note")
    if note:
        head.extend(_notice(str(note), width))
    sections = [Section(_instance_title(p), _instance_rows(p, lead)) for p in parts]
    return fit(head, sections, width=width, height=height)


def _delivery_style(delivery: str) -> str:
    return {"failed": "bold red", "pending": "yellow", "delivered": "green"}.get(delivery, "dim")


def _opened(row: Mapping[str, Any], now: datetime) -> str:
    opened = row.get("openedAt")
    if not isinstance(opened, str):
        return "-"
    try:
        at = datetime.fromisoformat(opened)
    except ValueError:
        return "-"
    return age((now - at).total_seconds())


def _incident_rows(
    rows: Sequence[Mapping[str, Any]], now: datetime, keep: Callable[[Mapping[str, Any]], bool]
) -> list[Text]:
    out = []
    for row in rows:
        if not keep(row):
            continue
        routed, style = _routed(row)
        delivery = str(row.get("delivery", "none"))
        out.append(
            _row(
                (short_id(str(row.get("id"))), SHORT_ID, "dim"),
                (str(row.get("state")), 17, ""),
                (str(row.get("target") or row.get("subject")), 12, ""),
                (_opened(row, now), 6, ""),
                (routed, 14, style),
                (delivery, 0, _delivery_style(delivery)),
            )
        )
    return out


def incident_screen(
    listing: Mapping[str, Any],
    *,
    source: str,
    who: str,
    now: datetime,
    lead: str | None = None,
    width: int = 80,
    height: int = 24,
) -> list[Text]:
    """``fleetd incidents`` (and ``top``'s incident screen): open incidents, then those
    resolved in the last 24 hours, each with its routing and the delivery state of its events
    (``none``, ``pending``, ``delivered``, ``failed``, ``cancelled``)."""
    rows = list(listing.get("incidents", []))
    if lead is not None:
        rows = [r for r in rows if _concerns(r, lead)]
    head = [Text("fleetd ", style="bold") + Text(source) + Text(f" as {who}", style="cyan")]
    if listing.get("truncated"):
        head.append(Text(f"the journal listed its first {listing.get('limit')}", style="yellow"))
    opened = _incident_rows(rows, now, lambda r: r.get("status") == "open")
    resolved = _incident_rows(rows, now, lambda r: r.get("status") != "open")
    sections = [
        Section(_title(f"OPEN {len(opened)}", "age · routing · delivery"), opened),
        Section(_title(f"RESOLVED {len(resolved)}", "in the last 24 hours"), resolved),
    ]
    return fit(head, sections, width=width, height=height)
