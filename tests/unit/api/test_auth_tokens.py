"""Bearer tokens resolve to callers; member tokens are minted and revoked; tokens never leak."""

from __future__ import annotations

import logging

import pytest

from fleetd.api.auth import Authenticator, bearer_token
from fleetd.api.tools import Caller, Role
from fleetd.errors import AuthError, ConfigError
from fleetd.runs import Runs
from tests.unit.api.api_doubles import LEAD_TOKEN, OPERATOR_TOKEN, OTHER_LEAD_TOKEN


@pytest.mark.parametrize(
    ("header", "caller"),
    [
        (f"Bearer {LEAD_TOKEN}", Caller(role=Role.LEAD, name="alpha")),
        (f"bearer {OTHER_LEAD_TOKEN}", Caller(role=Role.LEAD, name="beta")),
        (f"Bearer   {OPERATOR_TOKEN} ", Caller(role=Role.OPERATOR, name="operator")),
    ],
)
def test_configured_tokens_resolve(
    authenticator: Authenticator, header: str, caller: Caller
) -> None:
    """Each configured lead token and the operator token resolve to their caller."""
    assert authenticator.authenticate(header) == caller


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {LEAD_TOKEN}",
        LEAD_TOKEN,
        f"Bearer {LEAD_TOKEN}x",
        f"Bearer {LEAD_TOKEN[:-1]}",
        "Bearer unknown-token",
    ],
)
def test_missing_malformed_or_unknown_tokens_are_refused(
    authenticator: Authenticator, header: str | None
) -> None:
    """Anything but a known bearer token raises AuthError, and the message never quotes it."""
    with pytest.raises(AuthError) as refused:
        authenticator.authenticate(header)
    assert LEAD_TOKEN not in str(refused.value)
    assert refused.value.status == 401


def test_member_tokens_are_minted_resolved_and_revoked(authenticator: Authenticator) -> None:
    """A minted member token resolves to that member until its session is revoked."""
    token = authenticator.mint_member_token("s-1", "worker-1")
    other = authenticator.mint_member_token("s-2", "worker-2")
    assert len(token) >= 40
    assert token != other
    assert authenticator.resolve(token) == Caller(
        role=Role.MEMBER, name="worker-1", session_id="s-1"
    )
    authenticator.revoke("s-1")
    with pytest.raises(AuthError):
        authenticator.resolve(token)
    assert authenticator.resolve(other).session_id == "s-2"
    authenticator.revoke("s-unknown")


def test_reminting_replaces_the_earlier_token(authenticator: Authenticator) -> None:
    """Minting again for a session invalidates that session's previous token."""
    first = authenticator.mint_member_token("s-1", "worker-1")
    second = authenticator.mint_member_token("s-1", "worker-1")
    with pytest.raises(AuthError):
        authenticator.resolve(first)
    assert authenticator.resolve(second).name == "worker-1"


@pytest.mark.parametrize(
    ("leads", "operator", "key"),
    [
        ({"alpha": ""}, None, "auth.leads.alpha"),
        ({"alpha": "has space"}, None, "auth.leads.alpha"),
        ({"alpha": "same-token", "beta": "same-token"}, None, "auth.leads.beta"),
        ({"alpha": "lead-token"}, "lead-token", "auth.operator"),
    ],
)
def test_bad_configured_tokens_name_their_key(
    leads: dict[str, str], operator: str | None, key: str
) -> None:
    """An empty, spaced or shared token is a ConfigError naming its key, never its value."""
    with pytest.raises(ConfigError) as refused:
        Authenticator(lead_tokens=leads, operator_token=operator)
    assert refused.value.key == key
    for token in (*leads.values(), operator or "-"):
        if token.strip():
            assert token not in str(refused.value)


def test_member_token_needs_identity(authenticator: Authenticator) -> None:
    """A member token cannot be minted without a session id and a name."""
    with pytest.raises(ValueError, match="session id"):
        authenticator.mint_member_token("", "worker")


def test_bearer_token_parsing() -> None:
    """The bearer scheme is case-insensitive and surrounding spaces are ignored."""
    assert bearer_token("BEARER abc") == "abc"
    assert bearer_token("  Bearer   abc  ") == "abc"


def test_tokens_never_reach_logs_or_reprs(
    authenticator: Authenticator, caplog: pytest.LogCaptureFixture
) -> None:
    """No token appears in any log record or in the repr of what resolution returns."""
    with caplog.at_level(logging.DEBUG):
        token = authenticator.mint_member_token("s-1", "worker-1")
        callers = [authenticator.resolve(t) for t in (token, LEAD_TOKEN, OPERATOR_TOKEN)]
        for bad in (f"Bearer {token}-x", f"Bearer {LEAD_TOKEN[::-1]}"):
            with pytest.raises(AuthError):
                authenticator.authenticate(bad)
        authenticator.revoke("s-1")
    text = caplog.text + repr(callers) + repr(vars(authenticator))
    for secret in (token, LEAD_TOKEN, OPERATOR_TOKEN, OTHER_LEAD_TOKEN):
        assert secret not in text


def test_a_member_token_of_a_previous_run_says_fleetd_restarted() -> None:
    """A token minted by an ended run grants nothing, and its refusal names the restart."""
    before = Runs()
    old = Authenticator(lead_tokens={}, run=before.current).mint_member_token("s-1", "m1")
    now = Runs(previous=frozenset({before.current}))
    auth = Authenticator(lead_tokens={}, run=now.current, ended_run=now.ended)
    fresh = auth.mint_member_token("s-2", "m2")
    assert fresh.startswith(f"{now.current}.")
    with pytest.raises(AuthError, match="fleetd restarted") as refused:
        auth.resolve(old)
    assert refused.value.status == 401
    assert "nothing was replayed" in refused.value.message
    assert "its member was released" in refused.value.message  # true after a restart that kept it
    for unknown in (f"{now.current}.forged", "r00000000.forged", "no-run-here"):
        with pytest.raises(AuthError, match="not recognised"):
            auth.resolve(unknown)
