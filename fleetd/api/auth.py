"""Bearer tokens to callers.

Three kinds of token reach fleetd: one per lead (configured; the values come from environment
variables the config names), one operator token (read-only: the tool registry lets it call
``fleet_list`` and nothing else), and one per member, minted when the bridge spawns the member and
revoked when the member's session ends. The state store keeps each member token's SHA-256 hash,
so after a restart the token of an adopted member still works (:meth:`Authenticator.adopt_member`).
A member token begins with the id of the run that minted it (:mod:`fleetd.runs`): a token of a run
that is over and whose member was not adopted (its pane was gone, or the state was discarded)
authenticates no one, but its caller is told that fleetd restarted instead of a bare "not
recognised".

Tokens are compared in constant time: the presented token is checked against *every* known token
with :func:`hmac.compare_digest` on SHA-256 digests, with no early exit, so neither which token
matched nor how much of it matched shows in the timing. Only digests are kept. A token never
appears in a log line, an error message, a :class:`~fleetd.api.tools.Caller` or a response.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fastapi.security import HTTPBearer

from fleetd.api.tools import Caller, Role
from fleetd.errors import AuthError, ConfigError
from fleetd.runs import new_run_id, run_of_token

__all__ = [
    "BEARER_SCHEME",
    "OPERATOR_NAME",
    "Authenticator",
    "bearer_challenge",
    "bearer_token",
]

OPERATOR_NAME = "operator"

#: How ``/openapi.json`` names the bearer scheme (``components.securitySchemes.bearer``): the
#: routes declare it; :class:`Authenticator` checks the token (the scheme never refuses).
BEARER_SCHEME = HTTPBearer(
    scheme_name="bearer",
    description="a lead's, the operator's or a member's token (FLEETD_TOKEN)",
    auto_error=False,
)
_MEMBER_TOKEN_BYTES = 32
_PREVIOUS_RUN = (
    "this member token was issued by a previous run of fleetd and is not held now: either its "
    "member was released, or fleetd restarted without taking that run back (--discard-state, a "
    "lost store: the session and the results of that run are gone); nothing was replayed, this "
    "member can no longer reply, and fleet_list shows its lead whether it still runs (orphaned)"
)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value, or :class:`AuthError`."""
    if not authorization:
        raise AuthError("a bearer token is required")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthError("the Authorization header must be 'Bearer <token>'")
    return token


def bearer_challenge(*, presented: bool) -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750): ``invalid_token`` when one was sent."""
    return 'Bearer realm="fleetd"' + (', error="invalid_token"' if presented else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Identity:
    digest: bytes
    caller: Caller


def _add_fixed(fixed: list[_Identity], key: str, token: str, caller: Caller) -> None:
    if not token or any(ch.isspace() for ch in token):
        raise ConfigError(key, "token is empty or contains whitespace")
    digest = _digest(token)
    if any(hmac.compare_digest(digest, known.digest) for known in fixed):
        raise ConfigError(key, "token is shared with another identity")
    fixed.append(_Identity(digest=digest, caller=caller))


class Authenticator:
    """Resolves bearer tokens to callers; mints and revokes member tokens."""

    def __init__(
        self,
        *,
        lead_tokens: Mapping[str, str],
        operator_token: str | None = None,
        run: str | None = None,
        ended_run: Callable[[str], bool] = lambda _run: False,
    ) -> None:
        self._fixed: list[_Identity] = []
        self._members: dict[str, _Identity] = {}
        self._member_digests: dict[bytes, Caller] = {}
        self._run = run or new_run_id()
        self._ended_run = ended_run
        self.set_fixed(lead_tokens=lead_tokens, operator_token=operator_token)

    def set_fixed(
        self, *, lead_tokens: Mapping[str, str], operator_token: str | None = None
    ) -> None:
        """Replace the lead and operator identities (a config reload); all or nothing."""
        fixed: list[_Identity] = []
        for lead, token in lead_tokens.items():
            _add_fixed(fixed, f"auth.leads.{lead}", token, Caller(role=Role.LEAD, name=lead))
        if operator_token is not None:
            operator = Caller(role=Role.OPERATOR, name=OPERATOR_NAME)
            _add_fixed(fixed, "auth.operator", operator_token, operator)
        self._fixed = fixed

    def authenticate(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header value stands for, or :class:`AuthError`."""
        return self.resolve(bearer_token(authorization))

    def resolve(self, token: str) -> Caller:
        """The caller ``token`` stands for, or :class:`AuthError`.

        Constant time per configured identity. Member tokens (one per member: thousands) are
        found by their SHA-256 digest in a dict, so a request costs the same however large the
        fleet: a lookup's timing can only tell about the digest of the presented token, which no
        caller can steer toward a stored one.
        """
        digest = _digest(token)
        found: Caller | None = None
        for identity in self._fixed:
            if hmac.compare_digest(digest, identity.digest):
                found = identity.caller
        member = self._member_digests.get(digest)
        if member is not None:
            found = member
        if found is None:
            run = run_of_token(token)
            if run is not None and self._ended_run(run):
                raise AuthError(_PREVIOUS_RUN)
            raise AuthError("the bearer token is not recognised")
        return found

    def mint_member_token(self, session_id: str, member_name: str) -> str:
        """A fresh token for a spawned member; replaces any earlier token of that session."""
        if not session_id or not member_name:
            raise ValueError("a member token needs a session id and a member name")
        token = f"{self._run}.{secrets.token_urlsafe(_MEMBER_TOKEN_BYTES)}"
        caller = Caller(role=Role.MEMBER, name=member_name, session_id=session_id)
        self.revoke(session_id)
        identity = _Identity(digest=_digest(token), caller=caller)
        self._members[session_id] = identity
        self._member_digests[identity.digest] = caller
        return token

    def adopt_member(self, session_id: str, member_name: str, token_hash: str) -> None:
        """Accept again the token of a member a previous run minted, known by its stored SHA-256
        hash (hex): a restart keeps the member's token working."""
        caller = Caller(role=Role.MEMBER, name=member_name, session_id=session_id)
        self.revoke(session_id)
        identity = _Identity(digest=bytes.fromhex(token_hash), caller=caller)
        self._members[session_id] = identity
        self._member_digests[identity.digest] = caller

    def revoke(self, session_id: str) -> None:
        """Forget a member's token; unknown sessions are ignored."""
        identity = self._members.pop(session_id, None)
        if identity is not None:
            self._member_digests.pop(identity.digest, None)
