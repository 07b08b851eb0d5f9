"""Pure frames: request lines, response decoding and error classification."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.errors import ControlLinkError, HerdrError, InvalidResponseError, TargetNotFoundError
from fleetd.herdr import calls
from fleetd.herdr.protocol import (
    Call,
    decode_response,
    encode_request,
    error_for,
)
from fleetd.sim.events import decode_stream_line


def test_request_line_is_one_compact_json_object_with_string_id_and_params() -> None:
    """A request is one newline-terminated JSON line with a string id and explicit params."""
    line = encode_request("abc", "agent.list", {})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == {"id": "abc", "method": "agent.list", "params": {}}


def test_request_line_keeps_unicode_and_embedded_newlines_inside_the_one_line() -> None:
    """Text with newlines and glyphs stays inside the single framed line."""
    line = encode_request("1", "pane.send_text", {"pane_id": "w1:p1", "text": "a\nb ●"})
    assert line.count(b"\n") == 1
    assert json.loads(line)["params"]["text"] == "a\nb ●"


def test_request_line_over_one_mebibyte_is_refused() -> None:
    """herdr refuses request lines of 1 MiB or more, so the encoder does too."""
    with pytest.raises(HerdrError) as info:
        encode_request("1", "pane.send_text", {"pane_id": "p", "text": "x" * (1024 * 1024)})
    assert info.value.code == "request_too_large"


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("pane_not_found", TargetNotFoundError),
        ("agent_not_found", TargetNotFoundError),
        ("agent_pane_not_found", TargetNotFoundError),
        ("workspace_not_found", TargetNotFoundError),
        ("server_unavailable", ControlLinkError),
        ("agent_blocked", HerdrError),
        ("agent_not_ready", HerdrError),
        ("timeout", HerdrError),
        ("invalid_request", HerdrError),
    ],
)
def test_error_codes_are_classified(code: str, kind: type[HerdrError]) -> None:
    """`*_not_found` is target loss, `server_unavailable` link loss, the rest keep their code."""
    error = error_for(code, "msg", method="agent.get")
    assert type(error) is kind
    assert error.code == code
    assert error.method == "agent.get"


@given(st.from_regex(r"[a-z_]{1,20}_not_found", fullmatch=True))
def test_any_not_found_code_is_target_loss(code: str) -> None:
    """Every code ending in `_not_found` classifies as TargetNotFoundError."""
    assert isinstance(error_for(code), TargetNotFoundError)


def test_success_result_is_returned_for_matching_id() -> None:
    """A success frame with our id yields its result object."""
    line = b'{"id":"r1","result":{"type":"ok"}}\n'
    assert decode_response(line, request_id="r1", method="pane.close") == {"type": "ok"}


@pytest.mark.parametrize("echoed", ["r1", "", "r1:sub:0:probe"])
def test_error_frame_raises_even_with_empty_or_derived_id(echoed: str) -> None:
    """Errors carry our id, "" (unparseable request) or a derived subscription-probe id."""
    line = json.dumps({"id": echoed, "error": {"code": "pane_not_found", "message": "x"}})
    with pytest.raises(TargetNotFoundError):
        decode_response(line, request_id="r1", method="pane.get")


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b"[1,2]\n",
        b'{"id":"other","result":{"type":"ok"}}\n',
        b'{"id":"r1"}\n',
        b'{"id":"other","error":{"code":"x","message":"y"}}\n',
        b"\xff\xfe\n",
    ],
)
def test_garbage_or_foreign_answer_is_a_link_error(line: bytes) -> None:
    """An answer that is not a herdr response to this request means the link is wrong."""
    with pytest.raises(ControlLinkError) as info:
        decode_response(line, request_id="r1", method="ping")
    assert info.value.code == "invalid_response"


@pytest.mark.parametrize(
    "result",
    [{}, {"type": "agent_prompted"}, {"type": "agent_prompted", "agent": {"pane_id": 3}}],
)
def test_a_result_that_cannot_be_read_is_an_invalid_response_naming_the_method(
    result: dict[str, object],
) -> None:
    """herdr answered, but not with an agent: InvalidResponseError, never a link error or crash."""
    line = json.dumps({"id": "r1", "result": result})
    with pytest.raises(InvalidResponseError) as info:
        calls.agent_prompt("m-1", "task").parse_response(line, "r1")
    assert not isinstance(info.value, ControlLinkError)
    assert (info.value.code, info.value.method) == ("invalid_response", "agent.prompt")


def test_a_parser_that_trips_becomes_an_invalid_response() -> None:
    """Any parser failure on a result is translated here, once, into InvalidResponseError."""

    def brittle(result: object) -> int:
        return int(dict[str, int]()["missing"])

    call = Call(method="agent.get", params={}, parse=brittle)
    with pytest.raises(InvalidResponseError) as info:
        call.parse_response('{"id":"r1","result":{"type":"x"}}', "r1")
    assert info.value.method == "agent.get"


def test_unknown_fields_everywhere_are_ignored() -> None:
    """Extra fields in the envelope, result and nested objects do not break parsing."""
    line = json.dumps(
        {
            "id": "r1",
            "extra": 1,
            "result": {
                "type": "agent_info",
                "new": [1],
                "agent": {
                    "terminal_id": "term_1",
                    "agent_status": "idle",
                    "workspace_id": "w1",
                    "tab_id": "w1:t1",
                    "pane_id": "w1:p1",
                    "focused": False,
                    "revision": 0,
                    "future_field": {"a": 1},
                },
            },
        }
    )
    agent = calls.agent_get("w1:p1").parse_response(line, "r1")
    assert agent.pane_id == "w1:p1"


def test_stream_line_parses_events_and_skips_other_frames() -> None:
    """On a subscription stream, event lines parse; frames without `event` are skipped."""
    event = decode_stream_line(
        b'{"event":"pane_exited","data":{"type":"pane_exited","pane_id":"w1:p2",'
        b'"workspace_id":"w1"}}'
    )
    assert event is not None
    assert decode_stream_line(b'{"id":"x","result":{"type":"subscription_started"}}') is None


def test_stream_error_frame_is_raised_classified() -> None:
    """An error pushed on the stream (events_lost) surfaces as a HerdrError with that code."""
    with pytest.raises(HerdrError) as info:
        decode_stream_line(b'{"id":"s","error":{"code":"events_lost","message":"behind"}}')
    assert info.value.code == "events_lost"


def test_error_without_body_is_a_link_error() -> None:
    """An `error` member that is not an object is not herdr speaking."""
    with pytest.raises(ControlLinkError):
        decode_response(b'{"id":"r1","error":"boom"}', request_id="r1", method="ping")


def test_an_answer_nested_past_the_parser_is_a_link_error_not_a_crash() -> None:
    """Valid JSON nested deeper than ``json.loads`` follows raises RecursionError inside the
    parser: it is an ``invalid_response`` like any other unreadable answer."""
    line = b'{"id":"r1","result":' + b"[" * 200_000
    with pytest.raises(ControlLinkError) as info:
        calls.agent_prompt("m-1", "task").parse_response(line, "r1")
    assert (info.value.code, info.value.method) == ("invalid_response", "agent.prompt")
