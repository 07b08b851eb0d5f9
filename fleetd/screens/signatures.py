"""The table of fatal signatures, one literal family per row (see :mod:`.fatal` for the rules).

Every row is pinned by a fixture under ``tests/fixtures/screens`` and by a composed screen from
:mod:`.examples`. Turn patterns are matched with ``re.match`` against the squashed message (all
whitespace removed, ``∙``/``•`` read as ``·``, ``’`` as ``'``); :func:`_lit` builds one from a
literal written with its spaces, so the table reads like the agents' own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleetd.screens.blocks import squash
from fleetd.screens.kinds import AgentKind

__all__ = ["CRASH_RULES", "TURN_RULES", "CrashRule", "TurnRule"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRule:
    """A signature matched on the message that ends the current turn."""

    id: str
    summary: str
    transient: bool
    patterns: tuple[re.Pattern[str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashRule:
    """A signature matched below the TUI's last chrome: ``first`` on a line, ``then`` soon after."""

    id: str
    summary: str
    transient: bool
    first: re.Pattern[str]
    then: re.Pattern[str] | None = None
    window: int = 6


def _lit(*literals: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(re.escape(squash(literal))) for literal in literals)


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern) for pattern in patterns)


def _turn(id_: str, summary: str, *patterns: re.Pattern[str], transient: bool) -> TurnRule:
    return TurnRule(id=id_, summary=summary, transient=transient, patterns=patterns)


_CLAUDE = (
    _turn(
        "claude.api_error_529",
        "Claude API overloaded (529); the turn ended, a later prompt may succeed",
        *_lit(
            "API Error: 529 Overloaded",
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error"',
        ),
        transient=True,
    ),
    _turn(
        "claude.api_error_500",
        "Claude API internal error (500); the turn ended, a later prompt may succeed",
        *_lit('API Error: 500 {"type":"error","error":{"type":"api_error"'),
        transient=True,
    ),
    _turn(
        "claude.oauth_expired",
        "Claude Code OAuth token expired; a person must run /login",
        *_lit(
            'API Error: 401 {"type":"error","error":{"type":"authentication_error",'
            '"message":"OAuth token has expired'
        ),
        transient=False,
    ),
    _turn(
        "claude.oauth_revoked",
        "Claude Code OAuth token revoked; a person must run /login",
        *_lit("OAuth token revoked · Please run /login"),
        transient=False,
    ),
    _turn(
        "claude.bad_api_key",
        "Claude Code API key invalid or missing; a person must fix the key or run /login",
        *_lit(
            "Invalid API key · Please run /login",
            "Missing API key · Run /login",
            "Invalid API key · Fix external API key",
        ),
        transient=False,
    ),
    _turn(
        "claude.credit_low",
        "Claude API credit balance too low; a person must add funds",
        *_lit("Credit balance too low · Add funds"),
        transient=False,
    ),
    _turn(
        "claude.usage_limit",
        "Claude usage limit reached; the member is idle until the reset time",
        *_rx(
            r"You'vehityour[\w-]*limit·resets",
            r"5-hourlimitreached·resets",
            r"Limitreached·resets",
            r"Claudeusagelimitreached\.Yourlimitwillresetat",
            r"ClaudeAIusagelimitreached\|\d+",
        ),
        transient=False,
    ),
    _turn(
        "claude.rate_limit",
        "Claude API rate limited; the turn ended, a later prompt may succeed",
        *_lit("API Error: Rate limit reached", "API Error: Request rejected (429) · Rate limited"),
        transient=True,
    ),
    _turn(
        "claude.prompt_too_long",
        "Claude Code conversation too long; the session needs /compact or /clear",
        *_lit(
            "Prompt is too long",
            "Error: Error during compaction: Error: Conversation too long",
        ),
        transient=False,
    ),
    _turn(
        "claude.broken_history",
        "Claude Code history has tool_use without tool_result; every prompt fails",
        *_rx(
            re.escape(
                squash('API Error: 400 {"type":"error","error":{"type":"invalid_request_error",')
            )
            + r'"message":"messages\.\d+:`tool_use`idswerefoundwithout`tool_result`blocks'
        ),
        transient=False,
    ),
    _turn(
        "claude.network",
        "Claude Code could not reach the API after its retries; the turn ended",
        *_lit("API Error: Unable to connect to API (", "API Error: Request timed out."),
        transient=True,
    ),
    _turn(
        "claude.policy_refusal",
        "Claude API refused the prompt under its usage policy; the lead must rephrase",
        *_lit(
            "API Error: Claude Code is unable to respond to this request, which appears to"
            " violate our Usage Policy"
        ),
        transient=False,
    ),
)
_CODEX = (
    _turn(
        "codex.usage_limit",
        "Codex usage limit reached; the member is idle until the reset time",
        *_lit("You've hit your usage limit."),
        transient=False,
    ),
    _turn(
        "codex.plan_excluded",
        "Codex is not included in the signed-in ChatGPT plan",
        *_lit("To use Codex with your ChatGPT plan, upgrade to Plus"),
        transient=False,
    ),
    _turn(
        "codex.quota_exceeded",
        "Codex API quota exceeded; a person must check billing",
        *_lit("Quota exceeded. Check your plan and billing details."),
        transient=False,
    ),
    _turn(
        "codex.retry_exhausted_429",
        "Codex gave up after repeated 429 Too Many Requests; the turn ended",
        *_rx(r"(?:streamerror:)?exceededretrylimit,laststatus:429(?!\d)"),
        transient=True,
    ),
    _turn(
        "codex.retry_exhausted_401",
        "Codex gave up after repeated 401 Unauthorized; a person must sign in again",
        *_rx(r"(?:streamerror:)?exceededretrylimit,laststatus:401(?!\d)"),
        transient=False,
    ),
    _turn(
        "codex.unexpected_status",
        "Codex got an unexpected HTTP status from its provider (auth or configuration)",
        *_rx(r"unexpectedstatus\d{3}", r'\{"type":"error","status":\d{3},"error":\{'),
        transient=False,
    ),
    _turn(
        "codex.refresh_token",
        "Codex could not refresh its access token; a person must sign in again",
        *_lit("Your access token could not be refreshed because your refresh token was"),
        transient=False,
    ),
    _turn(
        "codex.stream_lost",
        "Codex lost its response stream after reconnecting; the turn ended",
        *_lit("stream disconnected before completion:"),
        transient=True,
    ),
    _turn(
        "codex.context_full",
        "Codex ran out of context window; the session needs a new thread",
        *_lit("Codex ran out of room in the model's context window."),
        *_rx(r"Errorrunningremotecompacttask:.*context_length_exceeded"),
        transient=False,
    ),
    _turn(
        "codex.high_demand",
        "Codex provider under high demand; the turn ended, a later prompt may succeed",
        *_lit("We're currently experiencing high demand"),
        transient=True,
    ),
    _turn(
        "codex.blocked_region",
        "Codex access blocked by Cloudflare (restricted region)",
        *_lit("Access blocked by Cloudflare."),
        transient=False,
    ),
)
_OPENCODE = (
    _turn(
        "opencode.bad_api_key",
        "OpenCode provider rejected the API key",
        *_lit("Incorrect API key provided:", "invalid x-api-key"),
        transient=False,
    ),
    _turn(
        "opencode.credit_low",
        "OpenCode provider credit balance too low; a person must add credit",
        *_lit("Your credit balance is too low to access the Anthropic API."),
        transient=False,
    ),
    _turn(
        "opencode.context_overflow",
        "OpenCode prompt exceeds the model context; the session is stuck",
        *_rx(r"promptistoolong:\d+tokens>\d+maximum"),
        transient=False,
    ),
    _turn(
        "opencode.unreachable",
        "OpenCode cannot reach its provider URL",
        *_rx(r"(?:Error:)?Unabletoconnect\.Isthecomputerabletoaccesstheurl\?"),
        transient=False,
    ),
    _turn(
        "opencode.conn_reset",
        "OpenCode provider reset the connection; the turn ended",
        *_lit("Connection reset by server"),
        transient=True,
    ),
    _turn(
        "opencode.model_not_found",
        "OpenCode model not found at its provider (configuration)",
        *_lit("Model not found: ", "No endpoints found for "),
        transient=False,
    ),
    _turn(
        "opencode.provider_http",
        "OpenCode provider request failed with an HTTP error",
        *_rx(r"(?:Error:)?ProviderrequestfailedwithHTTP\d{3}"),
        transient=False,
    ),
)

TURN_RULES: dict[AgentKind, tuple[TurnRule, ...]] = {
    AgentKind.CLAUDE: _CLAUDE,
    AgentKind.CODEX: _CODEX,
    AgentKind.OPENCODE: _OPENCODE,
}

CRASH_RULES: dict[AgentKind, tuple[CrashRule, ...]] = {
    AgentKind.CLAUDE: (
        CrashRule(
            id="claude.cli_crash",
            summary="Claude Code crashed; the process is gone",
            transient=False,
            first=re.compile(r"^ {0,2}ERROR {1,2}\S"),
            then=re.compile(
                r"(?:/\$bunfs/root/src/entrypoints/cli\.js|@anthropic-ai/claude-code/cli\.js):\d+"
            ),
        ),
        CrashRule(
            id="claude.cli_crash",
            summary="Claude Code crashed; the process is gone",
            transient=False,
            first=re.compile(r"^panic\(main thread\): "),
            then=re.compile(r"^oh no: Bun has crashed\."),
        ),
    ),
    AgentKind.CODEX: (
        CrashRule(
            id="codex.crash",
            summary="Codex crashed; the process is gone",
            transient=False,
            first=re.compile(
                r"^(?:The application panicked \(crashed\)\."
                r"|Error: thread/start failed during TUI bootstrap"
                r"|Error: turn/start failed in TUI)"
            ),
        ),
    ),
    AgentKind.OPENCODE: (
        CrashRule(
            id="opencode.crash",
            summary="OpenCode crashed; the TUI is gone",
            transient=False,
            first=re.compile(
                r"^(?:=== FATAL ERROR OCCURRED ===|(?:Error: )?tui bootstrap failed"
                r"|\S.* terminated by signal SIGABRT \(Abort\))"
            ),
        ),
    ),
}
