"""The terminal's HTTP client: ``GET /v1/fleet`` (long-poll too), ``GET /v1/incidents`` and
``GET /v1/whoami``.

Where fleetd is and who is asking come from the environment (``FLEETD_URL``, ``FLEETD_TOKEN`` by
default; the variable names can be changed). Every request has a deadline; a long-poll's read
deadline is its ``wait`` plus a margin. An answer is read up to :data:`MAX_BODY_BYTES`.

Failures are typed, each with the exit code the commands return:

==  =========================================================================================
2   no token in the environment, or a URL that is not http(s) (:class:`SetupError`)
3   fleetd is unreachable: refused connection, timeout, a broken answer (:class:`UnreachableError`)
4   the token is refused: 401 not recognised, or 403 not allowed (:class:`RefusedError`)
5   fleetd answered with another error, e.g. 503 journal unavailable (:class:`FailedError`)
==  =========================================================================================

A token never appears in a message: errors name the URL (without any user info) and fleetd's
error code and message, which never echo a token either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "DEFAULT_URL",
    "DEFAULT_URL_ENV",
    "MAX_BODY_BYTES",
    "FailedError",
    "FleetdClient",
    "RefusedError",
    "SetupError",
    "Target",
    "TermError",
    "UnreachableError",
]

DEFAULT_URL_ENV = "FLEETD_URL"
DEFAULT_TOKEN_ENV = "FLEETD_TOKEN"  # noqa: S105 — a variable name, not a token
DEFAULT_URL = "http://127.0.0.1:8765"
MAX_BODY_BYTES = 8 * 1024 * 1024
CONNECT_SECONDS = 5.0
READ_SECONDS = 10.0
POLL_MARGIN_SECONDS = 10.0


class TermError(Exception):
    """A failure the commands report in one line, with their exit code."""

    exit_code = 1


class SetupError(TermError):
    exit_code = 2


class UnreachableError(TermError):
    exit_code = 3


class RefusedError(TermError):
    exit_code = 4


class FailedError(TermError):
    exit_code = 5


def _shown(url: str) -> str:
    """``url`` without user info (it could hold a password)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


@dataclass(frozen=True, slots=True)
class Target:
    """Where fleetd answers, and the bearer token to present."""

    url: str
    token: str

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        *,
        url_env: str = DEFAULT_URL_ENV,
        token_env: str = DEFAULT_TOKEN_ENV,
    ) -> Target:
        url = environ.get(url_env, "").strip()
        if not url and url_env != DEFAULT_URL_ENV:  # named on purpose: never the default
            raise SetupError(f"{url_env} is not set: put fleetd's URL in it, or leave --url-env")
        url = url or DEFAULT_URL
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise SetupError(f"{url_env} must be an http(s) URL such as {DEFAULT_URL}")
        token = environ.get(token_env, "").strip()
        if not token:
            raise SetupError(
                f"{token_env} is not set: put the operator token or a lead's token in it"
            )
        return cls(url=url.rstrip("/"), token=token)

    @property
    def shown(self) -> str:
        """The URL as the screens print it."""
        return _shown(self.url)


class FleetdClient:
    """Reads the fleet view and the incident list of one fleetd (async, one connection pool)."""

    def __init__(self, target: Target, *, transport: httpx.AsyncBaseTransport | None = None):
        self.target = target
        self._http = httpx.AsyncClient(
            base_url=target.url,
            headers={"Authorization": f"Bearer {target.token}"},
            timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS),
            transport=transport,
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> FleetdClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def fleet(
        self, *, since_version: int | None = None, wait: float = 0, every: bool = False
    ) -> dict[str, Any]:
        """``GET /v1/fleet``: the view now, or (``since_version``, ``wait`` > 0) once its
        version moved past ``since_version`` or ``wait`` seconds passed; with ``every``,
        ``scope=all``: every fleetd sharing the journal (the operator's; answered at once)."""
        params: dict[str, str] = {}
        read = READ_SECONDS
        if every:
            return await self._get("/v1/fleet", {"scope": "all"}, read)
        if since_version is not None and wait > 0:
            params = {"sinceVersion": str(since_version), "wait": f"{wait:g}"}
            read = wait + POLL_MARGIN_SECONDS
        return await self._get("/v1/fleet", params, read)

    async def incidents(self) -> dict[str, Any]:
        """``GET /v1/incidents``: open incidents and those resolved in the last 24 hours."""
        return await self._get("/v1/incidents", {}, READ_SECONDS)

    async def whoami(self) -> dict[str, Any]:
        """``GET /v1/whoami``: ``{"role": "operator", "lead": null}`` or a lead's name."""
        return await self._get("/v1/whoami", {}, READ_SECONDS)

    async def _get(self, path: str, params: dict[str, str], read: float) -> dict[str, Any]:
        where = f"{self.target.shown}{path}"
        timeout = httpx.Timeout(read, connect=CONNECT_SECONDS)
        try:
            async with self._http.stream("GET", path, params=params, timeout=timeout) as answer:
                body = bytearray()
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise FailedError(f"{where} answered more than {MAX_BODY_BYTES} bytes")
                status = answer.status_code
        except httpx.TimeoutException:
            raise UnreachableError(f"fleetd did not answer in time at {where}") from None
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise UnreachableError(
                f"fleetd is unreachable at {self.target.shown} ({_reason(exc)})"
            ) from None
        try:
            document = json.loads(body)
        except ValueError:
            raise UnreachableError(f"{where} did not answer with JSON (status {status})") from None
        if status == 200 and isinstance(document, dict) and document.get("ok") is True:
            result = document.get("result")
            if isinstance(result, dict):
                return result
        code, message = _error_of(document)
        if status == 401:
            raise RefusedError(f"the token was refused (401 {code}): {message}")
        if status == 403:
            raise RefusedError(f"the token may not read {path} (403 {code}): {message}")
        raise FailedError(f"{where} answered {status} {code}: {message}")


def _error_of(document: Any) -> tuple[str, str]:
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return "unexpected_answer", "the answer is not fleetd's envelope"
    return str(error.get("code", "error")), str(error.get("message", ""))


def _reason(exc: Exception) -> str:
    """Bounded words for a transport failure (no exception text, which could hold a URL)."""
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host not found"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed without an answer"
    return type(exc).__name__
