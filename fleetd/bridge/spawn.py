"""Spawning a member: placement, worktree, pane, agent start.

Placement (:func:`~fleetd.bridge.placement.admit`) refuses a profile whose model is benched
(``profile_benched``) or that is at ``maxLoad`` (``capacity_exceeded``), from the row the
capacity view shows.

The session exists (``SPAWNING``) from the moment placement admits it, so concurrent spawns count
against ``maxLoad``. Anything that fails before the member registers rolls the spawn back
(``SPAWN_ROLLBACK``): the pane is closed and a provisioned worktree removed. The member's first
authenticated contact — not herdr's ``interactive_ready`` — makes it ``READY``. Once herdr has
created the pane, the member's mark is written (:mod:`fleetd.bridge.marks`); orphans of a previous
run count against ``maxLoad`` and keep their names.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fleetd.bridge.launch import model_args, plan_launch, write_launch_files
from fleetd.bridge.lifecycle import TargetLifecycle
from fleetd.bridge.marks import mark_of, write_mark
from fleetd.bridge.orphans import OrphanBook
from fleetd.bridge.placement import NO_BENCH, FreeSlots, ModelBench, admit
from fleetd.bridge.prompt_policy import NOT_SENT_CODES
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent
from fleetd.bridge.worktrees import Worktree, Worktrees, check_source
from fleetd.clock import Clock
from fleetd.config import FleetdConfig, ProfileConfig
from fleetd.errors import (
    ConflictError,
    ControlLinkError,
    FleetdError,
    HerdrError,
    InvalidArgumentsError,
    InvalidResponseError,
    ToolError,
    UnavailableError,
    WorktreeError,
)
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import PaneInfo

__all__ = ["SpawnParts", "SpawnRequest", "reclaim_pane", "spawn_member"]

_log = logging.getLogger("fleetd.bridge")

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnRequest:
    owner: str
    profile: str
    role: str | None = None
    name: str | None = None
    repo: str | None = None
    base: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnParts:
    """What a spawn uses of its bridge: ``run`` is this run's id, written into the mark."""

    control: AgentControl
    roster: Roster
    clock: Clock
    settings: Callable[[], FleetdConfig]
    worktrees: Worktrees
    lifecycle: TargetLifecycle
    orphans: OrphanBook
    run: str
    bench: ModelBench = NO_BENCH
    free: FreeSlots = dict  # each profile's free slots, for a benched refusal's hint
    launching: Callable[[Session], None] = lambda _session: None  # stored ahead of agent.start
    #: stored ahead of workspace.create, with the pane ids under its label (None: unknown)
    creating: Callable[[Session, list[str] | None], None] = lambda _session, _before: None

    def name_taken(self, name: str) -> bool:
        """True while a live member or an orphan of a previous run has the agent name."""
        return self.roster.name_taken(name) or self.orphans.name_taken(name)


async def spawn_member(
    parts: SpawnParts,
    request: SpawnRequest,
    *,
    mint_token: Callable[[str, str], str],
    base_url: str,
    session_root: Path,
) -> Session:
    """Start one member for ``request.owner``; returns the session in ``SPAWNING``."""
    profile, name = _admitted(parts, request)
    session_id = f"s-{secrets.token_hex(4)}"
    now = parts.clock.now()
    session = Session(
        session_id=session_id,
        name=name,
        profile=request.profile,
        kind=profile.kind,
        role=request.role,
        owner=request.owner,
        created_at=now,
        state_since=now,
    )
    roster = parts.roster
    roster.add(session)
    try:
        worktree = await _provision(parts, session, request)
        if worktree is not None and not _wanted(parts, session_id):
            await _remove_quietly(parts, session, worktree)  # its release could not see it
        _still_wanted(parts, session_id)
        if worktree is not None:
            session = roster.update(session_id, worktree=worktree)
        token = mint_token(session_id, name)
        plan = plan_launch(
            kind=profile.kind,
            base_url=base_url,
            token=token,
            session_id=session_id,
            session_dir=session_root / session_id,
        )
        write_launch_files(plan)
        cwd = str(session.worktree.path) if session.worktree else None
        before = await _labelled(parts.control, name)  # what herdr has under the name already
        there = None if before is None else [pane.pane_id for pane in before]
        parts.creating(session, there)  # a crash from here on rolls the spawn back at start
        try:
            pane = await parts.control.create_pane(cwd=cwd, env=plan.env, label=name)
        except HerdrError as exc:
            if _may_have_made(exc):
                await reclaim_pane(parts.control, session, there)
            raise
        if not _wanted(parts, session_id):
            await _close_quietly(parts.control, pane.pane_id)  # released meanwhile: nobody owns it
            raise ConflictError("the member was stopped while it was starting")
        session = roster.update(session_id, pane_id=pane.pane_id, terminal_id=pane.terminal_id)
        await _mark(parts, session, session_root)
        parts.launching(session)  # a crash from here on is adopted or released, never lost
        await parts.control.start_agent(
            name=name,
            kind=profile.kind,
            pane_id=pane.pane_id,
            args=[
                *profile.args,
                *model_args(profile.kind, profile.model, profile.provider),
                *plan.args,
            ],
        )
        _still_wanted(parts, session_id)
        session = roster.update(session_id, launched=True)
    except BaseException as exc:
        # Whatever stopped the spawn — herdr, git, the disk, a cancellation — nothing may be
        # left half-started holding a slot: roll back, then tell the lead in tool terms.
        if _wanted(parts, session_id):
            session = roster.apply(session_id, SessionEvent.START_FAILED, parts.clock.now())
            await parts.lifecycle.release(session, ReleaseCause.SPAWN_ROLLBACK)
        _log_failure(session, exc)
        translated = _as_tool_error(exc)
        if translated is exc:
            raise
        raise translated from exc
    return session


async def _mark(parts: SpawnParts, session: Session, session_root: Path) -> None:
    """Write the member's mark, so that a run after a crash finds it (see ``marks``)."""
    mark = mark_of(session, run=parts.run)
    try:
        await asyncio.to_thread(write_mark, session_root, mark)
    except FleetdError as exc:
        _log.warning("session %s: %s; a crash would leave it unmanaged", session.session_id, exc)


def _wanted(parts: SpawnParts, session_id: str) -> bool:
    """The member is still live and no release of it is under way (a member released long ago
    may no longer be held at all)."""
    session = parts.roster.sessions.get(session_id)
    return session is not None and session.live and not parts.lifecycle.releasing(session_id)


def _still_wanted(parts: SpawnParts, session_id: str) -> None:
    if not _wanted(parts, session_id):
        raise ConflictError("the member was stopped while it was starting")


def _may_have_made(exc: HerdrError) -> bool:
    """True when a failed ``create_pane`` may have made the pane all the same: the request left
    and its answer was lost or could not be read."""
    if isinstance(exc, ControlLinkError):
        return exc.code not in NOT_SENT_CODES
    return isinstance(exc, InvalidResponseError)


async def _labelled(control: AgentControl, name: str) -> tuple[PaneInfo, ...] | None:
    """The panes herdr has in workspaces labelled ``name`` now (``None``: herdr cannot say)."""
    try:
        return await control.labelled_panes(name)
    except HerdrError:
        return None


async def reclaim_pane(
    control: AgentControl, session: Session, before: Iterable[str] | None
) -> None:
    """Close the pane herdr may have made for ``session`` without fleetd learning of it (its
    answer lost, or fleetd stopped before storing it): found by its workspace's label (the
    member's agent name), a shell with no agent in it whose id is not in ``before`` (what was
    under the label before the create) — never a pane fleetd did not make. When herdr or
    ``before`` cannot say, the log names the label."""
    after = await _labelled(control, session.name)
    if after is None or before is None:
        _log.warning(
            "session %s: herdr may have made a pane in a workspace labelled %s that nothing "
            "owns; it could not be looked up",
            session.session_id,
            session.name,
        )
        return
    there = set(before)
    for pane in after:
        if pane.pane_id not in there and pane.agent is None:
            _log.warning(
                "session %s: closing pane %s herdr made for it that fleetd never took",
                session.session_id,
                pane.pane_id,
            )
            await _close_quietly(control, pane.pane_id)


async def _close_quietly(control: AgentControl, pane_id: str) -> None:
    try:
        await control.close_pane(pane_id)
    except HerdrError:
        return


async def _remove_quietly(parts: SpawnParts, session: Session, worktree: Worktree) -> None:
    """Remove, branch and all, a worktree just made for a member released while it was made:
    nothing was done in it and nobody owns it. A failure leaves it on disk, said in the log."""
    try:
        await parts.worktrees.remove(worktree, delete_branch=True)
    except Exception as exc:  # noqa: BLE001 - whatever git said, the worktree may still be there
        _log.warning(
            "session %s: stopped while its worktree was made; the worktree %s could not be "
            "removed (%s) and stays",
            session.session_id,
            worktree.path,
            type(exc).__name__,
        )


def _log_failure(session: Session, exc: BaseException) -> None:
    """Say why herdr failed a spawn: the link's cause class (timeout, refused, reset, ...) or
    herdr's error code — bounded words an operator can tell apart, never foreign text."""
    if isinstance(exc, ControlLinkError):
        _log.warning(
            "spawn of %s (%s) rolled back: the link to herdr failed at %s: %s (%s)",
            session.name,
            session.session_id,
            exc.method or "connect",
            exc.cause.value,
            exc.code,
        )
    elif isinstance(exc, HerdrError):
        _log.warning(
            "spawn of %s (%s) rolled back: herdr refused %s: %s",
            session.name,
            session.session_id,
            exc.method or "a call",
            exc.code,
        )


def _as_tool_error(exc: BaseException) -> BaseException:
    """The lead-facing form of a spawn failure; unexpected errors pass through unchanged."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, WorktreeError):
        if exc.reason == "invalid_argument":
            return InvalidArgumentsError(
                "repo must be an absolute path to a git repository and base a ref name",
                path="repo",
                rule="invalid_repository",
            )
        return ConflictError(f"the worktree could not be provisioned ({exc})")
    if isinstance(exc, ControlLinkError):
        return UnavailableError(f"herdr cannot be reached ({exc.cause}); no member was started")
    if isinstance(exc, HerdrError):
        return ConflictError(f"herdr refused to start the member ({exc.code})")
    return exc


def _admitted(parts: SpawnParts, request: SpawnRequest) -> tuple[ProfileConfig, str]:
    """The profile and name of a spawn that may go ahead, or the refusal; nothing is held yet."""
    config = parts.settings()
    profile = config.profiles.get(request.profile)
    if profile is None:
        raise InvalidArgumentsError(
            "profile is not configured; configured profiles: " + ", ".join(sorted(config.profiles)),
            path="profile",
            rule="unknown_profile",
        )
    name = request.name or _default_name(parts, request.profile)
    if not _NAME.fullmatch(name):  # fullmatch: "$" alone would let a final newline through
        raise InvalidArgumentsError(
            "name must match [a-z][a-z0-9_-]{0,31}", path="name", rule="string_pattern_mismatch"
        )
    if parts.name_taken(name):
        raise ConflictError(f"a live member or an orphan is already named {name!r}")
    source = _source(config, request)
    if source is not None:
        try:
            check_source(repo=source[0], base=source[1])
        except WorktreeError as exc:  # refused before it holds a slot: nothing to roll back
            raise _as_tool_error(exc) from None
    admit(
        request.profile,
        profile.max_load,
        [*parts.roster.live(), *parts.orphans.members()],
        bench=parts.bench,
        now=parts.clock.now(),
        free=parts.free,
    )
    return profile, name


def _source(config: FleetdConfig, request: SpawnRequest) -> tuple[Path, str] | None:
    """The repository and base ref of the member's worktree, when the request or the config
    names a repo."""
    repo = request.repo or config.worktrees.default_repo
    if repo is None:
        return None
    return Path(repo), request.base or config.worktrees.default_base


async def _provision(parts: SpawnParts, session: Session, request: SpawnRequest) -> Worktree | None:
    """The member's worktree, provisioned when the request or the config names a repo."""
    config = parts.settings()
    source = _source(config, request)
    if source is None:
        return None
    repo, base = source
    return await parts.worktrees.provision(
        repo=repo,
        base=base,
        branch=f"fleetd/{session.name}-{session.session_id}",
        path=config.worktrees.root / session.session_id,
    )


def _default_name(parts: SpawnParts, profile: str) -> str:
    stem = re.sub(r"[^a-z0-9_-]", "-", profile.lower()).strip("-") or "member"
    if not stem[0].isalpha():
        stem = f"m-{stem}"
    stem = stem[:24]
    return parts.roster.next_name(stem, parts.name_taken)
