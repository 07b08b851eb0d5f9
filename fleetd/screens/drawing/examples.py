"""One example message per fatal signature, worded as the agent prints it; SCREENS.md's names.

The fatal part of :mod:`fleetd.screens.drawing.vocabulary` (import it from there). Both drawers
render
these — :func:`fleetd.screens.drawing.compose.compose_error_screen` and the simulator's
:func:`fleetd.sim.screens.errored` — and the tests check that each one matches its own signature and
no other. The texts follow the literals recorded in ``shared/agents/SCREENS.md``; times, ids and
request ids are made up.

Each entry is ``(style, message)``: ``bullet`` is a Claude assistant line (``⏺`` and a 2-space
continuation), ``result`` an orphan Claude result (``⎿`` and a 5-space continuation), ``square`` a
Codex error cell (``■``, wrapped to column 0), ``box`` an OpenCode error box above a duration-less
footer, and ``crash`` a terminal the TUI has left, showing the crash output.
"""

from __future__ import annotations

from fleetd.screens.kinds import AgentKind

__all__ = ["ERROR_EXAMPLES", "SCREENS_NAMES"]

_CLAUDE_CRASH = "\n".join(
    (
        "",
        "  ERROR  Cannot read properties of undefined (reading 'content')",
        "",
        " /$bunfs/root/src/entrypoints/cli.js:581:98877",
        "",
        " - <anonymous> (/$bunfs/root/src/entrypoints/cli.js:581:98877)",
        " - processTicksAndRejections (native:7:39)",
        "",
        "$ ",
    )
)
_CODEX_CRASH = "\n".join(
    (
        "",
        "The application panicked (crashed).",
        "Message:  called `Option::unwrap()` on a `None` value",
        "Location: tui/src/chatwidget.rs:912:41",
        "",
        "$ ",
    )
)
_OPENCODE_CRASH = "\n".join(
    (
        "",
        "=== FATAL ERROR OCCURRED ===",
        "TypeError: undefined is not an object (evaluating 'part.state')",
        "    at render (src/cli/cmd/tui/routes/session/index.tsx:412:18)",
        "",
        "$ ",
    )
)

ERROR_EXAMPLES: dict[AgentKind, dict[str, tuple[str, str]]] = {
    AgentKind.CLAUDE: {
        "claude.api_error_529": (
            "bullet",
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try"
            " again in a moment. If it persists, check https://status.claude.com.",
        ),
        "claude.api_error_500": (
            "bullet",
            'API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal'
            ' server error"},"request_id":"req_011CZsim0000"}',
        ),
        "claude.oauth_expired": (
            "bullet",
            'API Error: 401 {"type":"error","error":{"type":"authentication_error","message":'
            '"OAuth token has expired. Please obtain a new token or refresh your existing'
            ' token."}} · Please run /login',
        ),
        "claude.oauth_revoked": ("result", "OAuth token revoked · Please run /login"),
        "claude.bad_api_key": ("bullet", "Invalid API key · Please run /login"),
        "claude.credit_low": (
            "result",
            "Credit balance too low · Add funds: https://platform.claude.com/settings/billing",
        ),
        "claude.usage_limit": ("result", "You've hit your limit · resets 2:00pm (Europe/Lisbon)"),
        "claude.rate_limit": ("result", "API Error: Rate limit reached"),
        "claude.prompt_too_long": ("bullet", "Prompt is too long"),
        "claude.broken_history": (
            "bullet",
            'API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":'
            '"messages.7: `tool_use` ids were found without `tool_result` blocks immediately'
            " after: toolu_01Sim. Each `tool_use` block must have a corresponding `tool_result`"
            ' block in the next message."}}',
        ),
        "claude.network": ("bullet", "API Error: Unable to connect to API (ECONNRESET)"),
        "claude.policy_refusal": (
            "bullet",
            "API Error: Claude Code is unable to respond to this request, which appears to"
            " violate our Usage Policy (https://www.anthropic.com/legal/aup). Please double"
            " press esc to edit your last message or start a new session for Claude Code to"
            " assist with a different task.",
        ),
        "claude.cli_crash": ("crash", _CLAUDE_CRASH),
    },
    AgentKind.CODEX: {
        "codex.usage_limit": ("square", "You've hit your usage limit. Try again at 9:05 AM."),
        "codex.plan_excluded": (
            "square",
            "To use Codex with your ChatGPT plan, upgrade to Plus:"
            " https://openai.com/chatgpt/pricing.",
        ),
        "codex.quota_exceeded": ("square", "Quota exceeded. Check your plan and billing details."),
        "codex.retry_exhausted_429": (
            "square",
            "exceeded retry limit, last status: 429 Too Many Requests, request id: 5f0c2a7e-sim",
        ),
        "codex.retry_exhausted_401": (
            "square",
            "exceeded retry limit, last status: 401 Unauthorized, request id: 5f0c2a7f-sim",
        ),
        "codex.unexpected_status": (
            "square",
            "unexpected status 401 Unauthorized: Missing bearer or basic authentication in"
            " header, request id: 5f0c2a80-sim",
        ),
        "codex.refresh_token": (
            "square",
            "Your access token could not be refreshed because your refresh token was already"
            " used. Please log out and sign in again.",
        ),
        "codex.stream_lost": (
            "square",
            "stream disconnected before completion: error sending request for url"
            " (https://chatgpt.com/backend-api/codex/responses)",
        ),
        "codex.context_full": (
            "square",
            "Codex ran out of room in the model's context window. Start a new thread or clear"
            " earlier history before retrying.",
        ),
        "codex.high_demand": (
            "square",
            "We're currently experiencing high demand, which may cause temporary errors.",
        ),
        "codex.blocked_region": (
            "square",
            "Access blocked by Cloudflare. This usually happens when connecting from a"
            " restricted region (status 403 Forbidden)",
        ),
        "codex.crash": ("crash", _CODEX_CRASH),
    },
    AgentKind.OPENCODE: {
        "opencode.bad_api_key": (
            "box",
            "Incorrect API key provided: sk-proj-****sim0. You can find your API key at"
            " https://platform.openai.com/account/api-keys.",
        ),
        "opencode.credit_low": (
            "box",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans &"
            " Billing to upgrade or purchase credits.",
        ),
        "opencode.context_overflow": ("box", "prompt is too long: 203118 tokens > 200000 maximum"),
        "opencode.unreachable": (
            "box",
            "Unable to connect. Is the computer able to access the url?",
        ),
        "opencode.conn_reset": ("box", "Connection reset by server"),
        "opencode.model_not_found": (
            "box",
            "Model not found: openai/gpt-5.6-terra. Did you mean: openai/gpt-5.5?",
        ),
        "opencode.provider_http": ("box", "Error: Provider request failed with HTTP 404"),
        "opencode.crash": ("crash", _OPENCODE_CRASH),
    },
}

SCREENS_NAMES: dict[AgentKind, dict[str, str]] = {
    AgentKind.CLAUDE: {
        "overloaded": "claude.api_error_529",
        "api-500": "claude.api_error_500",
        "oauth-expired": "claude.oauth_expired",
        "oauth-revoked": "claude.oauth_revoked",
        "bad-key": "claude.bad_api_key",
        "credit": "claude.credit_low",
        "usage-limit": "claude.usage_limit",
        "rate-limit": "claude.rate_limit",
        "prompt-too-long": "claude.prompt_too_long",
        "broken-history": "claude.broken_history",
        "network": "claude.network",
        "policy-refusal": "claude.policy_refusal",
        "cli-crash": "claude.cli_crash",
    },
    AgentKind.CODEX: {
        "usage-limit": "codex.usage_limit",
        "plan-excluded": "codex.plan_excluded",
        "quota": "codex.quota_exceeded",
        "retry-exhausted": "codex.retry_exhausted_429",
        "unexpected-status": "codex.unexpected_status",
        "refresh-token": "codex.refresh_token",
        "stream-lost": "codex.stream_lost",
        "context-full": "codex.context_full",
        "high-demand": "codex.high_demand",
        "blocked-region": "codex.blocked_region",
        "crash": "codex.crash",
    },
    AgentKind.OPENCODE: {
        "bad-key": "opencode.bad_api_key",
        "credit": "opencode.credit_low",
        "context": "opencode.context_overflow",
        "unreachable": "opencode.unreachable",
        "conn-reset": "opencode.conn_reset",
        "model": "opencode.model_not_found",
        "provider-http": "opencode.provider_http",
        "crash": "opencode.crash",
    },
}
"""The ``id`` column of SCREENS.md's signature tables (the names simulator scenarios use for
``error_signature``), mapped to the signature id fleetd reports for that kind."""
