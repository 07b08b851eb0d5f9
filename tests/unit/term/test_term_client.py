"""The terminal's HTTP client on a mock transport: deadlines (a long-poll's read deadline covers
its wait), the bound on an answer's size, and each failure's class, words and exit code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fleetd.term import client as client_module
from fleetd.term.client import (
    FailedError,
    FleetdClient,
    SetupError,
    Target,
    TermError,
    UnreachableError,
)

TOKEN = "client-test-token-0001"


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> FleetdClient:
    target = Target(url="http://fleetd.test:8765", token=TOKEN)
    return FleetdClient(target, transport=httpx.MockTransport(handler))


async def test_a_long_poll_asks_for_the_next_version_and_reads_past_its_wait() -> None:
    """sinceVersion and wait go as query parameters; the read deadline is the wait plus a
    margin, the connect deadline stays short; a plain read has the short deadlines."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True, "result": {"viewVersion": 8}})

    async with _client(handler) as client:
        assert await client.fleet(since_version=7, wait=25) == {"viewVersion": 8}
        await client.fleet()
    poll, plain = seen
    assert dict(poll.url.params) == {"sinceVersion": "7", "wait": "25"}
    assert poll.headers["authorization"] == f"Bearer {TOKEN}"
    timeout: dict[str, Any] = poll.extensions["timeout"]
    assert timeout["read"] == 25 + client_module.POLL_MARGIN_SECONDS
    assert timeout["connect"] == client_module.CONNECT_SECONDS
    assert dict(plain.url.params) == {}
    assert plain.extensions["timeout"]["read"] == client_module.READ_SECONDS


async def test_an_answer_larger_than_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The body is read in chunks up to MAX_BODY_BYTES; one byte more fails (exit 5)."""
    monkeypatch.setattr(client_module, "MAX_BODY_BYTES", 64)

    def handler(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True, "result": {"pad": "x" * 100}})

    async with _client(handler) as client:
        with pytest.raises(FailedError, match="answered more than 64 bytes") as failed:
            await client.incidents()
    assert failed.value.exit_code == 5


@pytest.mark.parametrize(
    ("answer", "kind", "code", "words"),
    [
        (
            httpx.Response(
                503,
                json={"ok": False, "error": {"code": "journal_unavailable", "message": "down"}},
            ),
            FailedError,
            5,
            "http://fleetd.test:8765/v1/incidents answered 503 journal_unavailable: down",
        ),
        (
            httpx.Response(200, text="<html>not fleetd</html>"),
            UnreachableError,
            3,
            "http://fleetd.test:8765/v1/incidents did not answer with JSON (status 200)",
        ),
        (
            httpx.Response(404, json={"detail": "Not Found"}),
            FailedError,
            5,
            "http://fleetd.test:8765/v1/incidents answered 404 unexpected_answer: the answer is "
            "not fleetd's envelope",
        ),
    ],
)
async def test_other_answers_fail_with_their_words_and_codes(
    answer: httpx.Response, kind: type[TermError], code: int, words: str
) -> None:
    """A fleetd error keeps its code and message; a page that is not JSON or not fleetd's
    envelope says so."""
    async with _client(lambda _request: answer) as client:
        with pytest.raises(kind) as failed:
            await client.incidents()
    assert (str(failed.value), failed.value.exit_code) == (words, code)


async def test_a_timeout_is_unreachable() -> None:
    """No answer within the deadline: unreachable (exit 3), naming the path."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    async with _client(handler) as client:
        with pytest.raises(UnreachableError, match="did not answer in time at") as failed:
            await client.fleet()
    assert failed.value.exit_code == 3


def test_the_target_comes_from_the_environment_and_hides_user_info() -> None:
    """URL and token from the named variables (default URL when unset); a URL's user info is
    never shown; a missing token or a URL that is not http(s) is a setup error (exit 2)."""
    default = Target.from_env({"FLEETD_TOKEN": TOKEN})
    assert (default.url, default.token) == ("http://127.0.0.1:8765", TOKEN)
    named = Target.from_env(
        {"U": "https://me:secret@fleet.example:9443/", "T": TOKEN}, url_env="U", token_env="T"
    )
    assert named.shown == "https://fleet.example:9443"
    with pytest.raises(SetupError, match="FLEETD_TOKEN is not set") as missing:
        Target.from_env({"FLEETD_TOKEN": "  "})
    assert missing.value.exit_code == 2
    with pytest.raises(SetupError, match="FLEETD_URL must be an http"):
        Target.from_env({"FLEETD_URL": "ftp://x", "FLEETD_TOKEN": TOKEN})
    # a variable named by --url-env that is not set is a mistake, not the default: the token
    # went to whatever answered on 127.0.0.1:8765
    with pytest.raises(SetupError, match="TYPO_URL is not set") as unset:
        Target.from_env({"FLEETD_URL": "http://fleet:1", "T": TOKEN}, url_env="TYPO_URL")
    assert unset.value.exit_code == 2
