"""Request lines are read, and refused, the way herdr's server reads them."""

from __future__ import annotations

import pytest

from fleetd.errors import HerdrError
from fleetd.sim.requests import KNOWN_METHODS, Params, Request, parse_request


@pytest.mark.parametrize(
    ("line", "answer_id", "detail"),
    [
        (b"not json", "", "expected value"),
        (b"[1]", "", "expected struct"),
        (b'{"method":"ping","params":{}}', "", "missing field `id`"),
        (b'{"id":1,"method":"ping","params":{}}', "", "expected a string"),
        (b'{"id":"a","params":{}}', "a", "missing field `method`"),
        (b'{"id":"a","method":"warp","params":{}}', "a", "unknown variant `warp`"),
        (b'{"id":"a","method":"ping"}', "a", "missing field `params`"),
    ],
)
def test_unparseable_requests(line: bytes, answer_id: str, detail: str) -> None:
    """Bad lines are invalid_request; the id is echoed only when it was a string."""
    parsed = parse_request(line)
    assert isinstance(parsed, tuple)
    request_id, error = parsed
    assert request_id == answer_id
    assert error.code == "invalid_request"
    assert detail in error.message


def test_good_request_parses() -> None:
    """A well-formed line gives the typed request."""
    parsed = parse_request(b'{"id":"x","method":"agent.get","params":{"target":"m1"}}\n')
    assert parsed == Request(id="x", method="agent.get", params={"target": "m1"})


def test_known_methods_are_herdrs_91() -> None:
    """The simulator knows herdr 0.8.2's full method list (protocol 20)."""
    assert len(KNOWN_METHODS) == 91
    assert {"agent.prompt", "agent.wait", "pane.send_input", "events.subscribe"} <= KNOWN_METHODS


@pytest.mark.parametrize(
    ("raw", "call"),
    [
        ({}, lambda p: p.text("pane_id")),
        ({"pane_id": 3}, lambda p: p.text("pane_id")),
        ({"lines": -1}, lambda p: p.opt_int("lines")),
        ({"lines": True}, lambda p: p.opt_int("lines")),
        ({"focus": "yes"}, lambda p: p.flag("focus")),
        ({"keys": "enter"}, lambda p: p.strings("keys")),
        ({}, lambda p: p.strings("keys", required=True)),
        ({"env": {"A": 1}}, lambda p: p.env()),
        ({"source": "recent-unwrapped"}, lambda p: p.source()),
        ({"until": ["sleeping"]}, lambda p: p.statuses("until")),
        ({"agent_status": "sleeping"}, lambda p: p.status("agent_status")),
        ({"wait": []}, lambda p: p.obj("wait")),
    ],
)
def test_bad_params_are_invalid_request(raw: dict[str, object], call) -> None:  # type: ignore[no-untyped-def]
    """Missing or mistyped params fail as invalid_request, like serde."""
    with pytest.raises(HerdrError) as info:
        call(Params(raw))
    assert info.value.code == "invalid_request"
