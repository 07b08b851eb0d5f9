"""The state store's contract, the same cases on the in-memory fake, SQLite and PostgreSQL: one
atomic write per change, puts replace by key, a load gives back what was written in acceptance
order, and ``discard`` forgets it all. SQLite and PostgreSQL also refuse a second writer of one
instance (naming the holder) and a store this build cannot read."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from alembic import command
from sqlalchemy import bindparam, text

from fleetd.config import parse_config
from fleetd.errors import StateStoreError
from fleetd.journal.tables import UtcDateTime
from fleetd.state.facts import DeliveryState, MemberRecord, TicketRecord, TurnRecord
from fleetd.state.lock import InstanceLock, LockCheck
from fleetd.state.memory import MemoryStateStore
from fleetd.state.opening import OpenedState, open_state
from fleetd.state.port import Change, StateStore
from fleetd.state.sql import SqlStateStore, state_alembic_config, state_engine
from fleetd.state.tables import VERSION_TABLE
from tests.pg_locks import end_lock_session

pytest_plugins = ["tests.contract.journal_fixtures"]

NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
DEADLINE = timedelta(seconds=2)


def _member(sid: str = "s-1", turn: int = 0) -> MemberRecord:
    return MemberRecord(
        session_id=sid,
        name=f"m-{sid}",
        profile="sonnet",
        kind="claude",
        role=None,
        owner="lead",
        created_at=NOW,
        pane_id="p1",
        terminal_id="t1",
        token_hash="ab" * 32,
        presence=True,
        turn=turn,
    )


def _ticket(tid: str, seq: int, **changes: object) -> TicketRecord:
    values: dict[str, object] = {
        "ticket_id": tid,
        "target": "s-1",
        "owner": "lead",
        "accepted_at": NOW,
        "seq": seq,
        "prompt": "do it",
    }
    values.update(changes)
    return TicketRecord(**values)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], StateStore]]:
    """A factory of stores on one backend (each call opens the same database anew)."""
    opened: list[StateStore] = []
    if request.param == "memory":
        shared = MemoryStateStore()
        yield lambda: shared
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        url = request.getfixturevalue("journal_pg_url")

    def make() -> StateStore:
        store = SqlStateStore(url, deadline=lambda: DEADLINE, instance="a")
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_a_load_gives_back_what_was_written_in_acceptance_order(
    make_store: Callable[[], StateStore],
) -> None:
    """Members, tickets (by seq) and turns written are what a fresh open loads."""
    store = make_store()
    store.apply(Change(members=(_member(),), tickets=(_ticket("t2", 2), _ticket("t1", 1))))
    store.apply(
        Change(
            turns=(
                TurnRecord(
                    session_id="s-1", token_id="turn-1", ticket_id="t1", turn=1, delivered_at=NOW
                ),
            )
        )
    )
    loaded = make_store().load()
    assert loaded.members == (_member(),)
    assert [t.ticket_id for t in loaded.tickets] == ["t1", "t2"]
    assert loaded.tickets[0] == _ticket("t1", 1)
    assert [t.token_id for t in loaded.turns] == ["turn-1"]


def test_a_put_replaces_by_key_and_drops_forget(make_store: Callable[[], StateStore]) -> None:
    """Writing a ticket again replaces it (uncertain, no prompt); drops remove records."""
    store = make_store()
    store.apply(Change(members=(_member(),), tickets=(_ticket("t1", 1),)))
    uncertain = _ticket(
        "t1", 1, prompt=None, delivery=DeliveryState.UNCERTAIN, turn=1, delivered_at=NOW
    )
    store.apply(Change(tickets=(uncertain,), members=(_member(turn=1),)))
    loaded = store.load()
    assert loaded.tickets == (uncertain,)
    assert loaded.members[0].turn == 1
    store.apply(Change(drop_members=("s-1",), drop_tickets=("t1",)))
    assert (store.load().members, store.load().tickets) == ((), ())


def test_a_release_under_way_is_kept_with_its_cause(make_store: Callable[[], StateStore]) -> None:
    """A member stored ahead of its release loads back with that release's cause."""
    store = make_store()
    stopping = dataclasses.replace(_member(), releasing="completed")
    store.apply(Change(members=(stopping,)))
    assert make_store().load().members == (stopping,)


def test_discard_forgets_everything(make_store: Callable[[], StateStore]) -> None:
    """``discard`` (``--discard-state``) leaves an empty store."""
    store = make_store()
    store.apply(Change(members=(_member(),), tickets=(_ticket("t1", 1),)))
    store.discard()
    loaded = make_store().load()
    assert (loaded.members, loaded.tickets, loaded.turns) == ((), (), ())


def test_a_ticket_record_never_holds_a_prompt_once_typed() -> None:
    """The record itself refuses a prompt beside a delivery other than queued."""
    with pytest.raises(ValueError, match="prompt"):
        _ticket("t1", 1, delivery=DeliveryState.TYPED)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    url: str = request.getfixturevalue("journal_pg_url")
    return url


def test_a_second_writer_of_one_instance_is_refused_naming_the_holder(store_url: str) -> None:
    """While one process holds the instance's lock, a second is refused with the holder's pid
    and host; once the first lets go, the second gets it. On PostgreSQL another instance name is
    free meanwhile (an SQLite file has one writer whatever the name)."""
    first_store = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
    second_store = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
    first = InstanceLock(first_store.engine, store_url, "alpha")
    second = InstanceLock(second_store.engine, store_url, "alpha")
    other = InstanceLock(second_store.engine, store_url, "beta")
    try:
        first.acquire(NOW)
        with pytest.raises(StateStoreError) as refused:
            second.acquire(NOW)
        assert refused.value.reason == "held"
        assert "pid" in str(refused.value)
        assert "alpha" in str(refused.value)
        if store_url.startswith("sqlite"):
            with pytest.raises(StateStoreError) as named:  # the file's one writer is named
                other.acquire(NOW)
            assert "held by instance 'alpha', pid" in str(named.value)
        else:
            other.acquire(NOW)
        first.release()
        second.acquire(NOW)
    finally:
        for lock in (first, second, other):
            lock.release()
        first_store.close()
        second_store.close()


def test_a_store_of_a_newer_build_is_refused(store_url: str) -> None:
    """A version table naming a revision this build does not ship: newer_schema, never a
    downgrade."""
    SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a").close()
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as db:
            db.execute(f"UPDATE {VERSION_TABLE} SET version_num = 's9999'")
    else:
        schema_store = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
        with schema_store.engine.begin() as connection:
            connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = 's9999'")
        schema_store.close()
    with pytest.raises(StateStoreError) as refused:
        SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
    assert refused.value.reason == "newer_schema"


def test_a_file_that_is_not_a_database_is_refused_as_corrupt(tmp_path: Path) -> None:
    """Garbage where the SQLite store should be: a clear ``corrupt`` refusal."""
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not an sqlite database at all" * 200)
    with pytest.raises(StateStoreError) as refused:
        SqlStateStore(f"sqlite:///{path}", deadline=lambda: DEADLINE, instance="a")
    assert refused.value.reason == "corrupt"


def test_the_sqlite_store_is_owner_only(tmp_path: Path) -> None:
    """The SQLite file is created 0600."""
    path = tmp_path / "sub" / "state.db"
    SqlStateStore(f"sqlite:///{path}", deadline=lambda: DEADLINE, instance="a").close()
    assert path.stat().st_mode & 0o777 == 0o600


def test_psycopg_is_the_postgresql_driver() -> None:
    """The PostgreSQL store goes through psycopg 3, as the journal does."""
    assert psycopg.__version__.startswith("3.")


def test_a_standby_try_answers_false_while_held_and_takes_the_lock_once_let_go(
    store_url: str,
) -> None:
    """``try_acquire`` (a standby's wait) answers ``False`` without raising while another process
    holds the instance, names no one as itself, and takes the lock (recording itself as holder)
    once the holder lets go."""
    first_store = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
    second_store = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="a")
    first = InstanceLock(first_store.engine, store_url, "alpha")
    standby = InstanceLock(second_store.engine, store_url, "alpha")
    try:
        assert first.try_acquire(NOW)
        assert first.held
        assert not standby.try_acquire(NOW)
        assert not standby.held
        first.release()
        later = NOW + timedelta(seconds=1)
        assert standby.try_acquire(later)
        assert standby.try_acquire(later)  # asking again while holding it keeps it
        holder = standby.holder()
        assert holder is not None
        assert holder.started_at == later
    finally:
        for lock in (first, standby):
            lock.release()
        first_store.close()
        second_store.close()


@pytest.mark.parametrize("where", ["file", "memory"])
def test_an_sqlite_lock_always_checks_held(tmp_path: Path, where: str) -> None:
    """An OS file lock (or an in-memory database, one process by nature) cannot be lost: each
    check answers HELD and leaves the recorded holder as it was."""
    url = f"sqlite:///{tmp_path / 'state.db'}" if where == "file" else "sqlite://"
    store = SqlStateStore(url, deadline=lambda: DEADLINE, instance="a")
    lock = InstanceLock(store.engine, url, "alpha")
    try:
        assert lock.try_acquire(NOW)
        before = lock.holder()
        for _ in range(3):
            assert lock.check(NOW + timedelta(seconds=5)) is LockCheck.HELD
        assert lock.holder() == before
    finally:
        lock.release()
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("standby_waits", [False, True], ids=["retaken", "lost"])
def test_a_lock_cut_with_its_connection_is_taken_again_or_found_lost(
    journal_pg_url: str, journal_pg_base: str, journal_pg_schema: str, standby_waits: bool
) -> None:
    """PostgreSQL ends the holder's session (a restart, an idle-session kill): its advisory lock
    goes with it, silently. ``check`` finds the dead connection and takes the lock again — or,
    when a standby took it meanwhile, answers LOST (the holder must stop: one writer). A live
    connection checks HELD, and an OS file lock always does."""
    first_store = SqlStateStore(journal_pg_url, deadline=lambda: DEADLINE, instance="a")
    second_store = SqlStateStore(journal_pg_url, deadline=lambda: DEADLINE, instance="a")
    first = InstanceLock(first_store.engine, journal_pg_url, "alpha")
    standby = InstanceLock(second_store.engine, journal_pg_url, "alpha")
    try:
        assert first.try_acquire(NOW)
        assert first.check(NOW) is LockCheck.HELD
        end_lock_session(journal_pg_base, "alpha", journal_pg_schema)
        if standby_waits:
            assert standby.try_acquire(NOW)
            assert first.check(NOW) is LockCheck.LOST
            assert not first.held
        else:
            assert first.check(NOW) is LockCheck.RETAKEN
            assert not standby.try_acquire(NOW)
            assert first.check(NOW) is LockCheck.HELD
    finally:
        for lock in (first, standby):
            lock.release()
        first_store.close()
        second_store.close()


@pytest.mark.postgres
def test_one_instance_name_in_two_schemas_takes_two_locks(
    journal_pg_base: str, journal_pg_schema: str, journal_pg_url: str
) -> None:
    """The advisory lock's key includes the schema: the same instance name in two state stores
    of one database (two schemas) is two writers, not a refusal."""
    other_schema = f"fleetd_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(journal_pg_base, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{other_schema}"')
    other_url = journal_pg_url.replace(journal_pg_schema, other_schema)
    stores = [
        SqlStateStore(url, deadline=lambda: DEADLINE, instance="a")
        for url in (journal_pg_url, other_url)
    ]
    locks = [
        InstanceLock(store.engine, url, "alpha")
        for store, url in zip(stores, (journal_pg_url, other_url), strict=True)
    ]
    try:
        assert [lock.try_acquire(NOW) for lock in locks] == [True, True]
    finally:
        for lock in locks:
            lock.release()
        for store in stores:
            store.close()
        with psycopg.connect(journal_pg_base, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{other_schema}" CASCADE')


def test_two_instances_on_one_store_each_load_write_and_drop_only_their_own_rows(
    store_url: str,
) -> None:
    """Two instances sharing one store (hosts on one PostgreSQL schema) with the same session
    and ticket ids: each loads only its own rows, a put of one never replaces the other's, and
    one's drops (a member cleaned up, a turn ended, tickets compacted past retention) and its
    ``discard`` leave the other's rows whole."""
    alpha = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="alpha")
    beta = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="beta")
    turn = TurnRecord(session_id="s-1", token_id="turn-1", ticket_id="t1", turn=1, delivered_at=NOW)
    try:
        alpha.apply(Change(members=(_member(),), tickets=(_ticket("t1", 1),), turns=(turn,)))
        beta.apply(
            Change(
                members=(_member(turn=7),),
                tickets=(_ticket("t1", 1, prompt="beta's"), _ticket("t2", 2)),
                turns=(turn,),
            )
        )
        assert alpha.load().members == (_member(),)
        assert alpha.load().tickets == (_ticket("t1", 1),)
        assert beta.load().members == (_member(turn=7),)
        assert [t.prompt for t in beta.load().tickets] == ["beta's", "do it"]
        alpha.apply(Change(drop_members=("s-1",), drop_tickets=("t1", "t2"), drop_turns=("s-1",)))
        emptied = alpha.load()
        assert (emptied.members, emptied.tickets, emptied.turns) == ((), (), ())
        kept = beta.load()
        assert kept.members == (_member(turn=7),)
        assert [t.ticket_id for t in kept.tickets] == ["t1", "t2"]
        assert kept.turns == (turn,)
        alpha.apply(Change(members=(_member(),)))
        beta.discard()
        assert alpha.load().members == (_member(),)
        assert beta.load().members == ()
    finally:
        alpha.close()
        beta.close()


def test_rows_stored_before_instances_belong_to_the_recorded_holder(store_url: str) -> None:
    """A store written before rows carried an instance: migrating it gives its members, tickets
    and turns to the instance recorded as its holder, which loads them; another instance on the
    store sees none of them."""
    engine = state_engine(store_url, lambda: DEADLINE)
    at = bindparam("at", NOW, type_=UtcDateTime())
    try:
        with engine.connect() as connection:
            config = state_alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "s0001")
            connection.commit()
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO state_instances (instance, pid, host, started_at) "
                    "VALUES ('alpha', 1, 'h', :at)"
                ).bindparams(at),
            )
            connection.execute(
                text(
                    "INSERT INTO state_members (session_id, name, profile, kind, owner, "
                    "created_at, token_hash, presence, turn) "
                    "VALUES ('s-1', 'm', 'sonnet', 'claude', 'lead', :at, 'ab', true, 0)"
                ).bindparams(at),
            )
    finally:
        engine.dispose()
    alpha = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="alpha")
    beta = SqlStateStore(store_url, deadline=lambda: DEADLINE, instance="beta")
    try:
        assert [m.session_id for m in alpha.load().members] == ["s-1"]
        assert beta.load().members == ()
    finally:
        alpha.close()
        beta.close()


def _opened(path: Path, *, discard: bool) -> OpenedState:
    config = parse_config({"state": {"url": f"sqlite:///{path}"}}, {}).config
    return open_state(config, deadline=lambda: DEADLINE, instance="a", discard=discard, now=NOW)


def test_an_empty_store_file_is_refused_and_discard_sets_it_aside(tmp_path: Path) -> None:
    """A store file truncated to nothing is not a first start: ``open: empty``; with
    ``--discard-state`` it is set aside and a new store opens."""
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    with pytest.raises(StateStoreError) as refused:
        _opened(path, discard=False)
    assert (refused.value.operation, refused.value.reason) == ("open", "empty")
    opened = _opened(path, discard=True)
    try:
        assert opened.active
        assert opened.store.load().members == ()
    finally:
        opened.close()


@pytest.mark.parametrize("damage", ["garbage", "newer"])
def test_discard_state_sets_an_unreadable_file_aside_and_starts_afresh(
    tmp_path: Path, damage: str
) -> None:
    """A file no revision can read (garbage, a newer build's schema) stops a start; with
    ``--discard-state`` it is renamed beside the store, byte for byte, and a new store opens."""
    path = tmp_path / "state.db"
    if damage == "garbage":
        path.write_bytes(b"not a database" * 500)
    else:
        SqlStateStore(f"sqlite:///{path}", deadline=lambda: DEADLINE, instance="a").close()
        with sqlite3.connect(path) as db:
            db.execute(f"UPDATE {VERSION_TABLE} SET version_num = 's9999'")
    before = path.read_bytes()
    with pytest.raises(StateStoreError):
        _opened(path, discard=False)
    opened = _opened(path, discard=True)
    try:
        assert opened.active
        [aside] = [
            p
            for p in tmp_path.iterdir()
            if re.fullmatch(r"state.db.discarded-\d{8}T\d{6}Z", p.name)
        ]
        assert aside.read_bytes() == before
    finally:
        opened.close()


def test_discard_state_never_sets_aside_a_file_a_live_fleetd_holds(tmp_path: Path) -> None:
    """While another process holds the store's lock, an unreadable file stays where it is."""
    path = tmp_path / "state.db"
    path.write_bytes(b"not a database" * 500)
    holder = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(StateStoreError) as refused:
            _opened(path, discard=True)
        assert refused.value.reason == "corrupt"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db", "state.db.lock"]
    finally:
        os.close(holder)


def test_a_schema_that_does_not_exist_is_named_and_no_discard_is_offered(
    journal_pg_base: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``state.url`` naming a PostgreSQL schema that does not exist (a typo in its search_path)
    stops ``fleetd serve`` with exit 2 and says to create the schema or correct the URL. It said
    ``--discard-state`` starts afresh, which then failed the same way."""
    import yaml  # noqa: PLC0415

    from fleetd.cli import main  # noqa: PLC0415
    from fleetd.testing import sample_document  # noqa: PLC0415
    from tests.contract.journal_fixtures import schema_url  # noqa: PLC0415

    document = sample_document(tmp_path)
    document["state"] = {"url": schema_url(journal_pg_base, "fleetd_no_such_schema")}
    config = tmp_path / "fleetd.yaml"
    config.write_text(yaml.safe_dump(document))
    environ = {"T_OPERATOR": "op-token-1", "T_LEAD": "lead-token-1", "T_LEAD_B": "lead-token-2"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        for flags in ([], ["--discard-state"]):
            assert main(["serve", "--config", str(config), *flags]) == 2
            said = capsys.readouterr().err
            assert "schema" in said
            assert "does not exist" in said
            assert "--discard-state" not in said
