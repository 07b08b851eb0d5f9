"""``agent.list`` read by schema from the answer's bytes gives exactly what the general parser
gives: the same ``AgentInfo`` values, or the same classified error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.errors import FleetdError, InvalidResponseError
from fleetd.herdr import calls
from fleetd.herdr.agent_list import AgentListDecoder
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.herdr.protocol import Call
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import parse_scenario

SAMPLE = (
    Path(__file__).resolve().parents[3] / "contracts" / "herdr" / "responses" / "agent.list.json"
)


def _general() -> Call[tuple[AgentInfo, ...]]:
    """``agent.list`` read the general way (``json.loads``, then ``AgentInfo.from_wire``)."""
    return Call(method="agent.list", parse=calls.agent_list().parse)


def _outcome(call: Call[tuple[AgentInfo, ...]], line: bytes, request_id: str) -> Any:
    """What a call makes of a line: its agents, or the class, code and text of its error."""
    try:
        return call.parse_response(line, request_id)
    except FleetdError as exc:
        return (type(exc), getattr(exc, "code", None), str(exc))


def _line(frame: Any) -> bytes:
    """The frame as herdr writes it (UTF-8), or escaped where UTF-8 cannot carry it (a lone
    surrogate is written as ``\\ud800``)."""
    try:
        return json.dumps(frame, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(frame).encode() + b"\n"


def _agent(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "terminal_id": "term_1",
        "agent_status": "working",
        "workspace_id": "w1",
        "tab_id": "w1:t1",
        "pane_id": "w1:p1",
        "focused": False,
        "revision": 3,
    }
    base.update(fields)
    return {key: value for key, value in base.items() if value is not _ABSENT}


_ABSENT = object()


def test_the_recorded_sample_reads_the_same_both_ways() -> None:
    """The recorded ``agent.list`` answer gives the same agents through the decoder as through
    the general parser, and the decoder did read it (it did not fall back)."""
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))
    line = _line(sample)
    decoded = AgentListDecoder().decode(line, sample["id"])
    assert decoded is not None
    assert decoded == _general().parse_response(line, sample["id"])
    assert decoded[0].name == "lead"
    assert decoded[0].focused is True


async def test_the_simulators_answers_read_the_same_both_ways() -> None:
    """Over the socket, the client's ``agent.list`` of the simulator (agents idle, blocked,
    done, unknown, and a shell pane) equals the general parser's reading of the frames
    the simulator wrote."""
    scenario = parse_scenario(
        {
            "existing": [
                {"name": "lead", "kind": "claude", "cwd": "/tmp/lead"},
                {"name": "m1", "kind": "codex", "cwd": "/tmp/m1"},
                {"name": "m2", "kind": "claude", "status": "blocked"},
                {"name": "m3", "kind": "claude", "status": "done"},
                {"name": "m4", "kind": "opencode", "status": "unknown"},
                {"shell": True, "label": "spare"},
            ]
        }
    )
    frames: list[dict[str, Any]] = []
    async with SimHarness(scenario, tap=lambda kind, frame: frames.append(frame)) as h:
        first = await h.run(h.client.agent_list())
        h.sim.set_status("m2", AgentStatus.IDLE)
        second = await h.run(h.client.agent_list())
    answers = [f for f in frames if f.get("result", {}).get("type") == "agent_list"]
    assert len(answers) == 2
    for got, frame in zip((first, second), answers, strict=True):
        assert got == _general().parse_response(_line(frame), frame["id"])
    assert {a.agent_status for a in first} == set(AgentStatus) - {AgentStatus.WORKING}
    assert next(a for a in second if a.name == "m2").agent_status is AgentStatus.IDLE


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param(_agent(), id="only the required fields"),
        pytest.param(_agent(revision=_ABSENT, focused=_ABSENT), id="required fields left out"),
        pytest.param(
            _agent(
                agent_session={"id": "s1"},
                display_agent="Claude",
                state_labels={"a": "b"},
                tokens={"k": "v"},
                screen_detection_skipped=True,
                foreground_cwd="/x",
            ),
            id="fields fleetd does not read",
        ),
        pytest.param(_agent(name=None, agent=None, title=None, cwd=None), id="nulls"),
        pytest.param(_agent(revision=None, state_change_seq=None), id="null counters"),
        pytest.param(_agent(agent_status="sleeping"), id="a status from a later herdr"),
        pytest.param(_agent(agent_status=7), id="a status that is not a string"),
        pytest.param(_agent(agent_status=_ABSENT), id="no status"),
        pytest.param(_agent(name=5, cwd=["x"]), id="optional strings of another type"),
        pytest.param(_agent(focused="yes", launch_pending=1), id="flags of another type"),
        pytest.param(_agent(terminal_id=_ABSENT), id="no terminal id"),
        pytest.param(_agent(pane_id=12), id="a pane id that is not a string"),
        pytest.param(_agent(revision=True), id="a boolean revision"),
        pytest.param(_agent(state_change_seq=1.0), id="a float sequence"),
        pytest.param(_agent(revision=2**70), id="a revision beyond 64 bits"),
        pytest.param(_agent(name="\ud800"), id="a lone surrogate"),
    ],
)
def test_each_agent_shape_reads_the_same_both_ways(agent: dict[str, Any]) -> None:
    """Missing optional fields, unknown fields and wrong types give the same agents or the same
    ``invalid_response`` error through the client's call as through the general parser."""
    line = _line({"id": "r1", "result": {"type": "agent_list", "agents": [agent]}})
    assert _outcome(calls.agent_list(), line, "r1") == _outcome(_general(), line, "r1")


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":"r1","result":{"type":"agent_list"}}\n',
        b'{"id":"r1","result":{"type":"agent_list","agents":null}}\n',
        b'{"id":"r1","result":{"type":"agent_list","agents":[1]}}\n',
        b'{"id":"r1","result":null}\n',
        b'{"id":"r1"}\n',
        b'{"id":"other","result":{"type":"agent_list","agents":[]}}\n',
        b'{"id":"r1","error":{"code":"server_unavailable","message":"gone"}}\n',
        b'{"id":"","error":{"code":"invalid_request","message":"bad"}}\n',
        b'{"id":"r1","result":{"agents":[]},"error":{"code":"timeout"}}\n',
        b"[1, 2]\n",
        b"not json\n",
        b'{"id":"r1","result":{"agents":[]},"x":NaN}\n',
        b"\xff\xfe\n",
    ],
)
def test_each_frame_shape_reads_the_same_both_ways(line: bytes) -> None:
    """Frames without agents, errors, foreign ids and lines that are not JSON give the same
    outcome (the same classified error) with the decoder as without it."""
    assert _outcome(calls.agent_list(), line, "r1") == _outcome(_general(), line, "r1")


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.sampled_from([status.value for status in AgentStatus]),
    st.lists(st.integers(), max_size=2),
)
_keys = st.sampled_from(
    [
        "terminal_id",
        "agent_status",
        "workspace_id",
        "tab_id",
        "pane_id",
        "focused",
        "revision",
        "state_change_seq",
        "name",
        "agent",
        "title",
        "launch_pending",
        "interactive_ready",
        "cwd",
        "tokens",
    ]
)


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(_keys, _values, max_size=4), drop=st.sets(_keys, max_size=3))
def test_any_agent_reads_the_same_both_ways(changes: dict[str, Any], drop: set[str]) -> None:
    """Whatever types an agent's fields have, the decoder's outcome is the general parser's."""
    agent = {k: v for k, v in {**_agent(), **changes}.items() if k not in drop}
    line = _line({"id": "r1", "result": {"type": "agent_list", "agents": [agent, _agent()]}})
    assert _outcome(calls.agent_list(), line, "r1") == _outcome(_general(), line, "r1")


def test_unchanged_agents_are_handed_back_as_the_same_objects() -> None:
    """A second list hands back the first list's ``AgentInfo`` for each agent whose fields did
    not change and a new one for the agent that did; only the last list is kept."""
    decoder = AgentListDecoder()
    a, b = _agent(), _agent(terminal_id="term_2", pane_id="w2:p1", name="m2")
    first = decoder.decode(
        _line({"id": "1", "result": {"type": "agent_list", "agents": [a, b]}}), "1"
    )
    moved = {**b, "agent_status": "idle", "state_change_seq": 1}
    second = decoder.decode(
        _line({"id": "2", "result": {"type": "agent_list", "agents": [a, moved]}}), "2"
    )
    assert first is not None
    assert second is not None
    assert second[0] is first[0]
    assert second[1] is not first[1]
    assert second[1].agent_status is AgentStatus.IDLE
    third = decoder.decode(
        _line({"id": "3", "result": {"type": "agent_list", "agents": [moved]}}), "3"
    )
    assert third is not None
    assert third[0] is second[1]
    fourth = decoder.decode(
        _line({"id": "4", "result": {"type": "agent_list", "agents": [a]}}), "4"
    )
    assert fourth is not None
    assert fourth[0] is not first[0]  # a was not in the last list: not kept
    assert fourth[0] == first[0]


def test_a_list_of_the_same_length_is_compared_position_by_position() -> None:
    """At the same length each agent is compared with the one at its position: the unchanged
    ones are the previous objects, an agent that changed or moved is built again (equal in
    value to what the general parser reads)."""
    decoder = AgentListDecoder()
    agents = [_agent(terminal_id=f"term_{n}", pane_id=f"w1:p{n}", name=f"m{n}") for n in range(4)]
    first = decoder.decode(
        _line({"id": "1", "result": {"type": "agent_list", "agents": agents}}), "1"
    )
    swapped = [agents[0], agents[2], agents[1], {**agents[3], "state_change_seq": 9}]
    line = _line({"id": "2", "result": {"type": "agent_list", "agents": swapped}})
    second = decoder.decode(line, "2")
    assert first is not None
    assert second is not None
    assert [s is f for s, f in zip(second, first, strict=True)] == [True, False, False, False]
    assert second == _outcome(_general(), line, "2")
    assert decoder.decode(line.replace(b'"2"', b'"3"', 1), "3") == second


def test_a_reply_the_schema_refuses_reads_the_general_way_and_fails_classified() -> None:
    """A field of the wrong type, a foreign id or an error frame leaves the fast path: the call
    raises the general parser's classified error, never a decoding exception of its own."""
    decoder = AgentListDecoder()
    wrong = _line({"id": "1", "result": {"type": "agent_list", "agents": [_agent(terminal_id=7)]}})
    assert decoder.decode(wrong, "1") is None
    assert decoder.decode(b"{not json\n", "1") is None
    with pytest.raises(FleetdError) as caught:
        calls.agent_list(decoder).parse_response(b"{not json\n", "1")
    code = getattr(caught.value, "code", None)
    assert code == _outcome(_general(), b"{not json\n", "1")[1]


@pytest.mark.parametrize(
    "result",
    [
        pytest.param({"type": "agent_list"}, id="no agents"),
        pytest.param({}, id="an empty result"),
        pytest.param({"agents": []}, id="no type"),
        pytest.param({"type": "pane_list", "panes": []}, id="another type"),
        pytest.param({"type": "agent_list", "agents": None}, id="agents null"),
    ],
)
def test_an_answer_without_its_list_of_agents_is_refused_not_read_as_none(
    result: dict[str, Any],
) -> None:
    """An answer that is not an ``agent_list`` with its ``agents`` is ``invalid_response``
    through the decoder and the general parser alike: read as an empty list, it would say every
    member is gone."""
    line = _line({"id": "r1", "result": result})
    for call in (calls.agent_list(), _general()):
        outcome = _outcome(call, line, "r1")
        assert outcome[:2] == (InvalidResponseError, "invalid_response"), outcome
