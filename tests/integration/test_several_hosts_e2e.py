"""Several hosts end to end (issue 24): real processes on one machine, one PostgreSQL schema (the
shared journal and state store) and the local RabbitMQ (the leads' inboxes).

* host ``a``: ``fleetd sim`` and ``fleetd serve`` (instance ``host-a``), plus a standby for it —
  ``fleetd serve --standby``, same config, same instance, same herdr socket;
* host ``b``: ``fleetd sim`` and ``fleetd serve`` (instance ``host-b``), no standby;
* a receiver process (:mod:`tests.integration.stalling_receiver`) that logs every webhook
  request; the test verifies each signature and reads each ``webhook-id``.

Each host serves one lead of its own. Each test starts the three ``fleetd serve`` processes and
shows one thing: the fleet view of every instance from either one; one webhook per incident
revision while all of them run; ``kill -9`` of ``a``'s active process and the standby taking
over within two snapshot intervals, members working on, no ticket lost and no prompt typed twice
(also with both hosts sharing one state schema, each loading only its own rows);
``kill -9`` of ``b`` (no standby) paged once as INSTANCE_DOWN by a live instance and resolved
once when it returns; and a lead on ``a`` taking the incident of ``b``'s dead lead (routing
across hosts). Every wait polls an observable fact — ``/livez``,
``/readyz``, the receiver's log, a tool's answer, the journal — with a bounded deadline.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from fleetd.clock import SystemClock
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import StoredIncident
from fleetd.sim.client import SimClient
from tests.integration.test_instances_kill9_delivery import _posts, _token_env, _verified
from tests.integration.test_notify_sink_kill9 import (
    OPERATOR_TOKEN,
    Processes,
    _free_port,
    _until,
)
from tests.integration.test_notify_sink_kill9 import (
    processes as processes,  # noqa: PLC0414 — fixture
)
from tests.integration.test_serve_broker_logs import AMQP_URL, _broker, _delete_queues
from tests.integration.test_serve_process import _git_repo

pytest_plugins = ["tests.contract.journal_fixtures"]
pytestmark = [pytest.mark.postgres, pytest.mark.amqp, pytest.mark.timeout(300)]

SNAPSHOT_SECONDS = 15  # health.snapshotIntervalSeconds, its floor
HOSTS = ("a", "b")
INSTANCES = {"a": "host-a", "b": "host-b"}
_PEERS = {"LEAD_IDLE", "LEAD_WORKING"}  # a lead healthy enough to take a peer's incident

SCENARIO = """\
version: 1
defaults: {{start_seconds: 0.3, react_seconds: 0.1, turn_seconds: 1.0, frame_seconds: 0.2}}
existing:
  - {{name: {lead}, kind: claude, cwd: /tmp, label: {lead}}}
  - {{shell: true, cwd: /tmp, label: spare}}
"""


@dataclass
class Hosts:
    """Both hosts' simulators, the receiver, the configs and what the test reads: the journal,
    each simulator's prompt log and a herdr client per host."""

    processes: Processes
    tmp_path: Path
    leads: dict[str, str]
    ports: dict[str, int]
    standby_port: int
    configs: dict[str, Path]
    herdr: dict[str, SimClient]
    spares: dict[str, str]
    prompt_logs: dict[str, Path]
    hook_log: Path
    journal: SqlJournal
    journal_url: str
    state_urls: dict[str, str]
    socks: dict[str, Path]
    repo: Path
    serving: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    def configure(self, host: str) -> None:
        text = _config(self, host, sock=self.socks[host], repo=self.repo)
        self.configs[host].write_text(text, encoding="utf-8")

    def base(self, host: str) -> str:
        return f"http://127.0.0.1:{self.ports[host]}"

    async def serve(self, host: str, run: str) -> asyncio.subprocess.Process:
        """``fleetd serve`` of ``host`` (its output in ``<run>.log``), once ``/livez`` answers."""
        process = await self.processes.start(
            "-m", "fleetd", "serve", "--config", str(self.configs[host]), name=run
        )
        await _until(f"{run} serves", lambda: _status(f"{self.base(host)}/livez", 200), within=60)
        self.serving[host] = process
        return process

    async def standby(self) -> asyncio.subprocess.Process:
        """``fleetd serve --standby`` for ``a``, once its ``/readyz`` says it waits."""
        process = await self.processes.start(
            "-m", "fleetd", "serve", "--config", str(self.configs["a"]), "--standby", name="a-2"
        )
        waiting = f"http://127.0.0.1:{self.standby_port}/readyz"
        await _until("the standby waits", lambda: _status(waiting, 503), within=60)
        return process

    async def start_all(self) -> asyncio.subprocess.Process:
        """``a``, ``b`` and ``a``'s standby, all serving (the standby's process is returned)."""
        await asyncio.gather(self.serve("a", "a-1"), self.serve("b", "b-1"))
        return await self.standby()

    async def tool(self, host: str, tool: str, **args: Any) -> dict[str, Any]:
        """``tool`` called by ``host``'s lead on ``host``; its result (the call must succeed)."""
        token = f"e2e-{self.leads[host]}-token-0123456789"
        async with httpx.AsyncClient(base_url=self.base(host), timeout=15) as http:
            answer = await http.post(
                f"/v1/tools/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}
            )
        body: dict[str, Any] = answer.json()
        assert body["ok"], body
        result: dict[str, Any] = body["result"]
        return result

    async def fleet_all(self, host: str) -> dict[str, Any]:
        """The operator's ``GET /v1/fleet?scope=all`` on ``host``."""
        async with httpx.AsyncClient(base_url=self.base(host), timeout=15) as http:
            answer = await http.get(
                "/v1/fleet",
                params={"scope": "all"},
                headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            )
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        return result

    async def ready_member(self, host: str, name: str) -> str:
        """A member spawned by ``host``'s lead, once ``fleet_status`` says it is ready."""
        sid: str = (await self.tool(host, "fleet_spawn", profile="sonnet", name=name))["sessionId"]

        async def ready() -> bool | None:
            status = await self.tool(host, "fleet_status", sessionId=sid)
            return True if status["state"] == "ready" else None

        await _until(f"{name} is ready", ready)
        return sid

    async def settled(self, host: str, tickets: list[str]) -> dict[str, dict[str, Any]]:
        """Each ticket's ``fleet_poll`` answer once it is no longer pending."""
        results: dict[str, dict[str, Any]] = {}
        for ticket in tickets:

            async def ended(ticket: str = ticket) -> dict[str, Any] | None:
                polled = await self.tool(host, "fleet_poll", ticket=ticket)
                return polled if polled["status"] != "pending" else None

            results[ticket] = await _until(f"ticket {ticket} ends", ended, within=60)
        return results

    def prompts(self, host: str) -> Counter[str]:
        """How many times each task text was typed into a member of ``host``'s simulator (the
        lead's pane gets inbox nudges too: those are left out)."""
        log = self.prompt_logs[host]
        rows = [line.split("\t", 1) for line in log.read_text(encoding="utf-8").splitlines()]
        return Counter(text for target, text in rows if target != self.leads[host])

    async def lead_gone(self, host: str) -> None:
        """``host``'s lead's agent exits: its pane is closed."""
        [agent] = [a for a in await self.herdr[host].agent_list() if a.name == self.leads[host]]
        await self.herdr[host].pane_close(agent.pane_id)

    async def lead_back(self, host: str) -> None:
        """``host``'s lead is started again, in the spare shell pane."""
        await self.herdr[host].agent_start(self.leads[host], "claude", self.spares[host])

    def pages(self) -> list[tuple[str, str, str, str]]:
        """(event type, subject, incident state, webhook-id) of every request the receiver got,
        each signature verified (``webhook-id`` = ``Idempotency-Key`` = ``eventId``)."""
        ids, documents = _verified(self.hook_log)
        return [
            (d["eventType"], d["incident"]["subject"], d["incident"]["state"], key)
            for key, d in zip(ids, documents, strict=True)
        ]

    async def paged(self, event: str, subject: str, *, within: float) -> dict[str, Any]:
        """The first request the receiver logged of ``event`` about ``subject``."""

        async def arrived() -> dict[str, Any] | None:
            for post in _posts(self.hook_log):
                document: dict[str, Any] = json.loads(post["body"])
                if (document["eventType"], document["incident"]["subject"]) == (event, subject):
                    return document
            return None

        return await _until(f"a {event} page about {subject}", arrived, within=within)


async def _status(url: str, expected: int) -> bool | None:
    """True once ``url`` answers ``expected``."""
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            answer = await http.get(url)
    except httpx.TransportError:
        return None
    return True if answer.status_code == expected else None


def _config(hosts: Hosts, host: str, *, sock: Path, repo: Path) -> str:
    """``host``'s config: its instance, its lead (an inbox on RabbitMQ), the shared PostgreSQL
    journal, its state store, health at the snapshot floor and webhook pages."""
    lead = hosts.leads[host]
    standby = f"  standbyPort: {hosts.standby_port}\n" if host == "a" else ""
    return (
        f"instance: {INSTANCES[host]}\n"
        f"api:\n  host: 127.0.0.1\n  port: {hosts.ports[host]}\n{standby}"
        f"herdr:\n  socketPath: {sock}\n"
        "operatorTokenEnv: K9_OPERATOR\n"
        f"leads:\n  - name: {lead}\n    agent: {lead}\n    tokenEnv: {_token_env(lead)}\n"
        "profiles:\n  sonnet:\n    kind: claude\n"
        f"worktrees:\n  root: {hosts.tmp_path / host / 'worktrees'}\n  defaultRepo: {repo}\n"
        f"journal:\n  url: {json.dumps(hosts.journal_url)}\n"
        f"state:\n  url: {json.dumps(hosts.state_urls[host])}\n"
        f"inbox:\n  backend: amqp\n  amqp:\n    urls: [{AMQP_URL}]\n"
        f"health:\n  enabled: true\n  snapshotIntervalSeconds: {SNAPSHOT_SECONDS}\n"
        "  notifications:\n    mode: webhook\n    webhookUrlEnv: E2E_HOOK\n"
        "    secretEnv: K9_SECRET\n"
    )


@pytest.fixture
async def hosts(
    journal_pg_base: str,
    journal_pg_schema: str,
    journal_pg_url: str,
    processes: Processes,
    tmp_path: Path,
) -> AsyncIterator[Hosts]:
    """Both simulators (their leads' agents live, a spare shell beside each), the receiver and
    the configs of ``a`` and ``b``: the test's schema holds the journal, and each host's state
    store has a schema of its own (one shared schema loses members: see
    :func:`test_hosts_sharing_one_state_schema_keep_their_own_members`); no ``fleetd serve``
    yet."""
    _broker()
    state_schemas = {host: f"{journal_pg_schema}_{host}" for host in HOSTS}
    with psycopg.connect(journal_pg_base, autocommit=True) as db:
        for schema in state_schemas.values():
            db.execute(f'CREATE SCHEMA "{schema}"')
    suffix = uuid.uuid4().hex[:8]
    leads = {host: f"lead-{host}-{suffix}" for host in HOSTS}  # inbox queues are global
    herdr_dir = Path(tempfile.mkdtemp(prefix="fe2e"))  # a short path: unix sockets are limited
    socks = {host: herdr_dir / f"{host}.sock" for host in HOSTS}
    prompt_logs = {host: tmp_path / f"prompts-{host}.log" for host in HOSTS}
    for host in HOSTS:
        scenario = tmp_path / f"scenario-{host}.yaml"
        scenario.write_text(SCENARIO.format(lead=leads[host]), encoding="utf-8")
        await processes.start(
            "-m",
            "fleetd",
            "sim",
            "--socket",
            str(socks[host]),
            "--scenario",
            str(scenario),
            "--prompt-log",
            str(prompt_logs[host]),
            name=f"sim-{host}",
        )
    herdr = {host: SimClient(socks[host], clock=SystemClock(), request_timeout=5) for host in HOSTS}
    spares = {}
    for host in HOSTS:

        async def listed(host: str = host) -> Any:
            try:
                return await herdr[host].agent_list() if socks[host].exists() else None
            except Exception:  # noqa: BLE001 - not listening yet
                return None

        [agent] = await _until(f"simulator {host} answers", listed)
        spares[host] = next(
            p.pane_id for p in await herdr[host].pane_list() if p.pane_id != agent.pane_id
        )

    hook_log = tmp_path / "hooks.jsonl"
    receiver = await processes.start(
        "-m",
        "tests.integration.stalling_receiver",
        "--log",
        str(hook_log),
        name="receiver",
        pipe=True,
    )
    assert receiver.stdout is not None
    processes.env["E2E_HOOK"] = (await asyncio.wait_for(receiver.stdout.readline(), 30)).decode()
    for lead in leads.values():
        processes.env[_token_env(lead)] = f"e2e-{lead}-token-0123456789"
    journal = SqlJournal(journal_pg_url)
    built = Hosts(
        processes=processes,
        tmp_path=tmp_path,
        leads=leads,
        ports={host: _free_port() for host in HOSTS},
        standby_port=_free_port(),
        configs={host: tmp_path / host / "fleetd.yaml" for host in HOSTS},
        herdr=herdr,
        spares=spares,
        prompt_logs=prompt_logs,
        hook_log=hook_log,
        journal=journal,
        journal_url=journal_pg_url,
        state_urls={  # the journal's URL, naming the host's own schema
            host: journal_pg_url.replace(journal_pg_schema, state_schemas[host]) for host in HOSTS
        },
        socks=socks,
        repo=_git_repo(tmp_path / "repo"),
    )
    for host in HOSTS:
        built.configs[host].parent.mkdir()
        built.configure(host)
    try:
        yield built
    finally:
        await processes.stop_all()
        await journal.close()
        for lead in leads.values():
            await _delete_queues(lead)
        with psycopg.connect(journal_pg_base, autocommit=True) as db:
            for schema in state_schemas.values():
                db.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def _open_instance_incidents(hosts: Hosts) -> list[StoredIncident]:
    return [
        s
        for s in (await hosts.journal.load_open()).open_incidents
        if s.incident.subject in INSTANCES.values()
    ]


async def test_the_fleet_view_of_every_instance_answers_from_either_host(hosts: Hosts) -> None:
    """Members spawned on ``a`` and on ``b``; ``scope=all`` on ``a`` and on ``b`` each answer
    both instances — the answering one's own view first, the other's published summary with
    its members by lead — each part stamped with its instance and an age under two intervals.
    ``a``'s standby, waiting, answers no fleet view (503)."""
    await hosts.start_all()
    mine = {await hosts.ready_member("a", f"worker-a{n}") for n in (1, 2)}
    theirs = {await hosts.ready_member("b", f"worker-b{n}") for n in (1, 2, 3)}
    members = {"a": mine, "b": theirs}

    async def both_published(host: str) -> dict[str, Any] | None:
        answer = await hosts.fleet_all(host)
        other = answer["instances"][1] if len(answer["instances"]) == 2 else None
        if other is None or other["summary"] is None:
            return None
        other_host = "b" if host == "a" else "a"
        listed = {m["sessionId"] for m in other["summary"]["members"]}
        return answer if listed == members[other_host] else None

    for host, other in (("a", "b"), ("b", "a")):
        answer = await _until(
            f"scope=all on {host} shows {other}'s members",
            lambda host=host: both_published(host),  # type: ignore[misc]
            within=2 * SNAPSHOT_SECONDS + 10,
        )
        own, theirs_part = answer["instances"]
        assert [own["instance"], theirs_part["instance"]] == [INSTANCES[host], INSTANCES[other]]
        assert {m["sessionId"] for m in own["view"]["members"]} == members[host]
        assert theirs_part["summary"]["membersByLead"] == {hosts.leads[other]: len(members[other])}
        assert [lead["name"] for lead in theirs_part["summary"]["leads"]] == [hosts.leads[other]]
        assert theirs_part["down"] is False
        assert 0 <= theirs_part["ageSeconds"] < 2 * SNAPSHOT_SECONDS
        assert (answer["live"], answer["down"]) == (2, 0)
    waiting = f"http://127.0.0.1:{hosts.standby_port}/v1/fleet"
    assert await _status(waiting, 503)


async def test_one_webhook_per_incident_revision_while_every_instance_runs(hosts: Hosts) -> None:
    """Both hosts' leads are gone while ``a``, its standby and ``b`` run: no healthy lead
    anywhere, so each LEAD_UNREACHABLE goes to a person. When the leads are back each incident
    resolves. The receiver got, per incident, exactly one ``open`` then one ``resolved``, every
    request verified, and no ``webhook-id`` twice — one webhook per incident revision."""
    for host in HOSTS:
        await hosts.lead_gone(host)
    started = time.monotonic()
    await hosts.start_all()
    for host in HOSTS:
        document = await hosts.paged("open", hosts.leads[host], within=5 * SNAPSHOT_SECONDS)
        assert document["incident"]["state"] == "LEAD_UNREACHABLE"
    opened = time.monotonic()
    for host in HOSTS:
        await hosts.lead_back(host)
    for host in HOSTS:
        await hosts.paged("resolved", hosts.leads[host], within=5 * SNAPSHOT_SECONDS)
    print(
        f"both open pages {opened - started:.1f} s after the start, both resolved "
        f"{time.monotonic() - opened:.1f} s later"
    )

    pages = hosts.pages()
    assert Counter(key for *_, key in pages).most_common(1)[0][1] == 1  # no webhook-id twice
    for host in HOSTS:
        about = [
            (event, state) for event, subject, state, _ in pages if subject == hosts.leads[host]
        ]
        assert about == [("open", "LEAD_UNREACHABLE"), ("resolved", "LEAD_UNREACHABLE")]
    assert {subject for _, subject, _, _ in pages} == set(hosts.leads.values())


async def _readyz(url: str) -> tuple[int, dict[str, Any]] | None:
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            answer = await http.get(url)
    except httpx.TransportError:
        return None
    return answer.status_code, answer.json()


async def test_the_standby_takes_over_a_killed_host_within_two_intervals_losing_nothing(
    hosts: Hosts,
) -> None:
    """``kill -9`` of ``a``'s active process while its members work and sends wait: ``/readyz``
    of the standby goes from 503 ``standby`` to 200 on ``a``'s API port within two snapshot
    intervals; ``a`` lists the same members; every ticket sent before the kill and one sent
    after it end done by the member's reply; each prompt was typed once; ``b``'s members are
    untouched and no INSTANCE_DOWN is paged for ``a``."""
    await _standby_takes_over(hosts)


async def test_hosts_sharing_one_state_schema_keep_their_own_members(hosts: Hosts) -> None:
    """The same take-over with one state schema for both hosts, as the README's several-hosts
    example has it: the standby loads only ``host-a``'s members (the store's rows are per
    instance). Were ``b``'s member loaded too, its pane missing on ``a``'s herdr would be cleaned
    up — closing the pane of the same id on ``a``, one of ``a``'s own members — and that member's
    tickets would fail ``gone``."""
    hosts.state_urls = dict.fromkeys(HOSTS, hosts.journal_url)
    for host in HOSTS:
        hosts.configure(host)
    await _standby_takes_over(hosts)


async def _standby_takes_over(hosts: Hosts) -> None:
    standby = await hosts.start_all()
    status, waiting = await _readyz(f"http://127.0.0.1:{hosts.standby_port}/readyz") or (0, {})
    assert (status, waiting["standby"]) == (503, True)
    active = hosts.serving["a"]
    assert waiting["holder"]["pid"] == active.pid
    members = [await hosts.ready_member("a", f"worker-{n}") for n in (1, 2)]
    theirs = await hosts.ready_member("b", "worker-b")
    tickets = [
        (await hosts.tool("a", "fleet_send", target=sid, prompt=f"task {sid} {n}"))["ticket"]
        for n in range(3)
        for sid in members
    ]
    listed = await hosts.tool("a", "fleet_list")
    before = sorted((m["sessionId"], m["name"]) for m in listed["members"])

    active.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    assert await active.wait() == -signal.SIGKILL

    async def ready() -> bool | None:
        answer = await _readyz(f"{hosts.base('a')}/readyz")
        return True if answer is not None and answer[0] == 200 else None

    await _until("the standby serves a", ready, within=2 * SNAPSHOT_SECONDS + 5)
    took_over = time.monotonic() - killed
    print(f"take-over after kill -9: {took_over:.2f} s")
    assert took_over < 2 * SNAPSHOT_SECONDS
    assert standby.returncode is None

    after = sorted(
        (m["sessionId"], m["name"]) for m in (await hosts.tool("a", "fleet_list"))["members"]
    )
    assert after == before
    results = await hosts.settled("a", tickets)
    assert {(r["status"], r.get("source")) for r in results.values()} == {("done", "reply")}, (
        results
    )
    late = await hosts.tool("a", "fleet_send", target=members[0], prompt="after the take-over")
    assert (await hosts.settled("a", [late["ticket"]]))[late["ticket"]]["status"] == "done"
    typed = hosts.prompts("a")
    assert set(typed.values()) == {1}, typed
    assert len(typed) == len(tickets) + 1
    assert [m["sessionId"] for m in (await hosts.tool("b", "fleet_list"))["members"]] == [theirs]
    assert await _open_instance_incidents(hosts) == []
    assert [p for p in hosts.pages() if p[1] == INSTANCES["a"]] == []


async def test_a_killed_host_without_a_standby_is_paged_once_and_resolved_once(
    hosts: Hosts,
) -> None:
    """``kill -9`` of ``b`` (no standby): past two snapshot intervals a live instance opens
    INSTANCE_DOWN for ``host-b`` — one ``open`` page, sent by ``host-a``, and ``scope=all`` on
    ``a`` shows ``b`` down. ``b`` started again renews: one ``resolved`` page. Nothing else is
    paged and no webhook-id arrives twice."""
    await hosts.start_all()
    process = hosts.serving["b"]
    process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    assert await process.wait() == -signal.SIGKILL
    opened = await hosts.paged("open", INSTANCES["b"], within=4 * SNAPSHOT_SECONDS + 10)
    noticed = time.monotonic() - killed
    assert opened["incident"]["state"] == "INSTANCE_DOWN"
    assert opened["fleetdInstance"] == INSTANCES["a"]
    assert noticed > SNAPSHOT_SECONDS  # two intervals silent; its last renewal came before
    [down] = await _open_instance_incidents(hosts)
    assert (down.incident.subject, down.instance) == (INSTANCES["b"], INSTANCES["a"])
    view = await hosts.fleet_all("a")
    assert [(p["instance"], p["down"]) for p in view["instances"]] == [
        (INSTANCES["a"], False),
        (INSTANCES["b"], True),
    ]

    await hosts.serve("b", "b-2")
    back = time.monotonic()
    await hosts.paged("resolved", INSTANCES["b"], within=3 * SNAPSHOT_SECONDS + 10)
    print(
        f"INSTANCE_DOWN paged {noticed:.1f} s after kill -9, resolved "
        f"{time.monotonic() - back:.1f} s after the restart"
    )
    assert await _open_instance_incidents(hosts) == []
    pages = hosts.pages()
    assert [(event, subject, state) for event, subject, state, _ in pages] == [
        ("open", INSTANCES["b"], "INSTANCE_DOWN"),
        ("resolved", INSTANCES["b"], "INSTANCE_DOWN"),
    ]
    assert len({key for *_, key in pages}) == 2


async def test_a_lead_on_host_a_takes_the_incident_of_host_bs_dead_lead(hosts: Hosts) -> None:
    """Both hosts run with healthy leads and have published their summaries; ``b``'s only lead
    dies. Its LEAD_UNREACHABLE incident goes to ``a``'s healthy lead (a peer on another host),
    not to a person: the journal's incident names ``a``'s lead as recipient, ``a``'s lead gets
    the record through ``fleet_poll`` (its inbox on the shared RabbitMQ), and no page is sent."""
    await hosts.start_all()

    async def published() -> bool | None:
        parts = (await hosts.fleet_all("a"))["instances"]
        if len(parts) != 2 or parts[1]["summary"] is None:
            return None
        return True

    await _until("b's summary reaches a", published, within=2 * SNAPSHOT_SECONDS + 10)

    async def a_lead_judged() -> bool | None:
        # what b's journal holds of a: its lead with a health a tick judged (a peer candidate)
        parts = (await hosts.fleet_all("b"))["instances"]
        [part] = [p for p in parts if p["instance"] == INSTANCES["a"]]
        leads = (part["summary"] or {}).get("leads", [])
        judged = [lead for lead in leads if (lead.get("health") or {}).get("state") in _PEERS]
        return True if judged else None

    await _until("a's lead judged in b's journal", a_lead_judged, within=2 * SNAPSHOT_SECONDS + 10)

    async def b_renewed_since(seen: str) -> bool | None:
        # b's instances pass reads the other instances' leads as it renews: one renewal after
        # a's judged lead was in the journal, b's routing knows it
        parts = (await hosts.fleet_all("a"))["instances"]
        [part] = [p for p in parts if p["instance"] == INSTANCES["b"]]
        return True if part["lastSeen"] != seen else None

    parts = (await hosts.fleet_all("a"))["instances"]
    [b_part] = [p for p in parts if p["instance"] == INSTANCES["b"]]
    await _until(
        "b renews once more",
        lambda: b_renewed_since(b_part["lastSeen"]),
        within=2 * SNAPSHOT_SECONDS + 10,
    )
    await hosts.lead_gone("b")
    dead = hosts.leads["b"]

    async def opened() -> StoredIncident | None:
        found = [
            s
            for s in (await hosts.journal.load_open()).open_incidents
            if s.incident.subject == dead and s.incident.assignment is not None
        ]
        return found[0] if found else None

    stored = await _until(f"{dead}'s incident is routed", opened, within=5 * SNAPSHOT_SECONDS)
    assert stored.incident.assignment is not None
    assignment = stored.incident.assignment
    assert (assignment.recipient, assignment.reason.value) == (
        hosts.leads["a"],
        "peer_lead_incident",
    )

    async def delivered() -> list[dict[str, Any]] | None:
        polled = await hosts.tool("a", "fleet_poll", target=hosts.leads["a"])
        about = [m for m in polled["messages"] if m.get("subjectTerminal") == dead]
        return about or None

    [record] = await _until(f"{hosts.leads['a']} gets the record", delivered)
    assert record["state"] == "LEAD_UNREACHABLE"
    assert [p for p in hosts.pages() if p[1] == dead] == []
