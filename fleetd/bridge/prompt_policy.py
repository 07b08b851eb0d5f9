"""What one ``agent.prompt`` answer means for the task it carried, and when to try again (pure).

Theory of operation
-------------------
herdr's ``handle_agent_prompt`` checks the request, then writes the prompt's bytes into the agent's
PTY, schedules Enter, and only then builds its answer. So an answer is proof of nothing having been
typed only when herdr returns it *before* the write: an empty text (``empty_agent_prompt``), a
request it could not parse (``invalid_request``), a blocked agent (``agent_blocked``), an agent that
is not (or no longer) the pane's foreground process (``agent_not_ready``). Everything else may come
after the bytes reached the agent: ``agent_prompt_failed`` (a focus or text write that failed part
way), ``internal_error`` and ``server_unavailable`` (the answer itself failed), a code herdr added
after this table was written, an answer fleetd cannot read, a connection that broke or timed out
after the request left. Such a delivery is :attr:`PromptOutcome.UNCERTAIN`: the task is never typed
again (ARCHITECTURE invariant 1), the turn opens and is watched like any delivered one, and the
ticket says ``delivery: uncertain`` so the lead can judge.

=====================================================  ===================================
answer                                                 outcome
=====================================================  ===================================
ok                                                     ``DELIVERED``
``empty_agent_prompt`` ``invalid_request``              ``REFUSED``: retried, bounded
``agent_blocked`` ``agent_not_ready``
``invalid_params`` ``request_too_large`` (fleetd's      ``REFUSED``
encoder refuses before a byte leaves)
``*_not_found``                                         ``TARGET_LOST``: the target-loss path
link ``connect_failed`` / ``connect_timeout``           ``NOT_SENT``: the request never left
(before the request is written)
anything else, known or not                             ``UNCERTAIN``: never typed again
=====================================================  ===================================

A refusal is retried after a delay that doubles from ``base`` up to ``cap``; after ``retries``
retries the next refusal ends the ticket (nothing was typed, so failing it replays nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

__all__ = ["PromptOutcome", "RetryBudget", "classify_prompt_error", "retry_delay"]


class PromptOutcome(StrEnum):
    DELIVERED = "delivered"  # herdr answered ok: the bytes reached the PTY
    REFUSED = "refused"  # herdr refused before writing anything: may be tried again
    TARGET_LOST = "target_lost"  # a *_not_found answer
    NOT_SENT = "not_sent"  # the request never reached herdr
    UNCERTAIN = "uncertain"  # herdr may have typed it: never typed again


#: herdr's refusals returned before the PTY write, plus fleetd's own encoder refusals.
REFUSED_CODES = frozenset(
    {
        "empty_agent_prompt",
        "invalid_request",
        "agent_blocked",
        "agent_not_ready",
        "invalid_params",
        "request_too_large",
    }
)
#: Link failures that happen before the request is written.
NOT_SENT_CODES = frozenset({"connect_failed", "connect_timeout"})


def classify_prompt_error(code: str, *, link: bool) -> PromptOutcome:
    """The outcome of an ``agent.prompt`` that failed with ``code``.

    ``link`` is True for a failure of the link itself (no answer, or not herdr's JSON API), False
    for an answer herdr sent or a refusal fleetd's encoder raised before sending.
    """
    if link:
        return PromptOutcome.NOT_SENT if code in NOT_SENT_CODES else PromptOutcome.UNCERTAIN
    if code.endswith("_not_found"):
        return PromptOutcome.TARGET_LOST
    if code in REFUSED_CODES:
        return PromptOutcome.REFUSED
    return PromptOutcome.UNCERTAIN


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryBudget:
    """How often, and how far apart, a refused prompt is tried again."""

    retries: int
    base: timedelta
    cap: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if self.retries < 0 or self.base <= timedelta(0) or self.cap < self.base:
            raise ValueError("retries >= 0 and 0 < base <= cap")


def retry_delay(refusals: int, budget: RetryBudget) -> timedelta | None:
    """The wait before the next attempt after ``refusals`` refusals; ``None`` once it is spent."""
    if refusals < 1:
        return timedelta(0)
    if refusals > budget.retries:
        return None
    factor: int = 2 ** min(refusals - 1, 30)
    return min(budget.cap, budget.base * factor)
