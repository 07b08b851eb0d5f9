"""Preserved-worktree manifests: atomic 0600 writes, tolerant reloads, and the v1 JSON Schema."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.bridge import manifests as manifests_module
from fleetd.bridge.manifests import (
    MANIFEST_DIR,
    ManifestFault,
    PreservedWorktree,
    decode_manifest,
    encode_manifest,
    load_manifests,
    manifest_path,
    write_manifest,
)
from fleetd.bridge.release import ReleaseCause
from fleetd.errors import ManifestError

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts" / "worktrees"
SCHEMA = json.loads((CONTRACTS / "manifest.v1.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(
    SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)


def preserved(session_id: str = "m-1", **changes: Any) -> PreservedWorktree:
    fields: dict[str, Any] = {
        "session_id": session_id,
        "owner": "lead-a",
        "role": "member",
        "profile": "claude",
        "repository": "/srv/repo",
        "path": f"/srv/worktrees/{session_id}",
        "branch": f"fleet/{session_id}",
        "base_commit": "a" * 40,
        "cause": ReleaseCause.NEVER_READY,
        "released_at": T0,
        "state": "spawning",
        "pending_task_ids": ("t-1", "t-2"),
    }
    return PreservedWorktree(**(fields | changes))


def files_in(root: Path) -> list[str]:
    return sorted(os.listdir(root / MANIFEST_DIR))


# --- writing ----------------------------------------------------------------------------------


def test_round_trip_through_disk(tmp_path: Path) -> None:
    """A written manifest loads back equal, from the documented path."""
    manifest = preserved()
    path = write_manifest(tmp_path, manifest)
    assert path == tmp_path / MANIFEST_DIR / "m-1.json" == manifest_path(tmp_path, "m-1")
    result = load_manifests(tmp_path)
    assert result.manifests == (manifest,)
    assert result.errors == ()


def test_written_file_is_owner_only_and_no_temp_left(tmp_path: Path) -> None:
    """The manifest is mode 0600 in a 0700 directory, and no temporary file remains."""
    path = write_manifest(tmp_path, preserved())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert files_in(tmp_path) == ["m-1.json"]


def test_rewrite_replaces_whole_file(tmp_path: Path) -> None:
    """Writing the same session again replaces the manifest, still one file, still 0600."""
    write_manifest(tmp_path, preserved(state="busy"))
    path = write_manifest(tmp_path, preserved(state="failed", pending_task_ids=()))
    assert files_in(tmp_path) == ["m-1.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_manifests(tmp_path).manifests == (preserved(state="failed", pending_task_ids=()),)


def test_failed_replace_keeps_old_manifest_and_cleans_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails before the rename leaves the previous manifest intact and no temp file."""
    write_manifest(tmp_path, preserved(state="busy"))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)  # the os module manifests writes through
    with pytest.raises(ManifestError) as caught:
        write_manifest(tmp_path, preserved(state="failed"))
    assert str(caught.value) == "write_manifest: os_error"
    assert files_in(tmp_path) == ["m-1.json"]
    assert load_manifests(tmp_path).manifests == (preserved(state="busy"),)


def test_unwritable_root_is_manifest_error_without_path(tmp_path: Path) -> None:
    """A root that cannot hold the manifest directory raises ManifestError with bounded text."""
    root = tmp_path / "not-a-dir"
    root.write_text("")
    with pytest.raises(ManifestError) as caught:
        write_manifest(root, preserved())
    assert str(root) not in str(caught.value)
    assert caught.value.operation == "write_manifest"


# --- loading ----------------------------------------------------------------------------------


def test_reload_after_restart_sees_every_manifest_in_release_order(tmp_path: Path) -> None:
    """A fresh load (as after restart) finds all manifests, oldest release first."""
    later = preserved("m-2", released_at=T0 + timedelta(minutes=5), cause=ReleaseCause.SHUTDOWN)
    earlier = preserved("m-9", released_at=T0)
    write_manifest(tmp_path, later)
    write_manifest(tmp_path, earlier)
    assert load_manifests(tmp_path).manifests == (earlier, later)


def test_missing_directory_is_empty(tmp_path: Path) -> None:
    """No manifest directory means no preserved worktrees and no errors."""
    result = load_manifests(tmp_path / "nowhere")
    assert (result.manifests, result.errors) == ((), ())


def test_torn_manifest_is_reported_not_fatal_and_kept(tmp_path: Path) -> None:
    """A torn file is reported by name, the others still load, and the file is not deleted."""
    write_manifest(tmp_path, preserved("m-1"))
    torn = manifest_path(tmp_path, "m-2")
    whole = json.dumps(encode_manifest(preserved("m-2"))).encode()
    torn.write_bytes(whole[: len(whole) // 2])
    result = load_manifests(tmp_path)
    assert result.manifests == (preserved("m-1"),)
    assert [(p.name, p.reason) for p in result.errors] == [("m-2.json", ManifestFault.NOT_JSON)]
    assert torn.read_bytes() == whole[: len(whole) // 2]


def _valid(session_id: str = "m-2") -> dict[str, Any]:
    return encode_manifest(preserved(session_id))


BAD_FILES: list[tuple[str, bytes, ManifestFault, str]] = [
    ("m-2.json", b"\xff\xfe not utf-8", ManifestFault.NOT_JSON, ""),
    ("m-2.json", b"", ManifestFault.NOT_JSON, ""),
    ("m-2.json", b"[]", ManifestFault.INVALID, "not an object"),
    (
        "m-2.json",
        json.dumps({k: v for k, v in _valid().items() if k != "baseCommit"}).encode(),
        ManifestFault.INVALID,
        "baseCommit",
    ),
    ("m-2.json", json.dumps(_valid() | {"cause": "boom"}).encode(), ManifestFault.INVALID, "cause"),
    (
        "m-2.json",
        json.dumps(_valid() | {"pendingTaskIds": [1]}).encode(),
        ManifestFault.INVALID,
        "pendingTaskIds",
    ),
    (
        "m-2.json",
        json.dumps(_valid() | {"schemaVersion": 2}).encode(),
        ManifestFault.UNSUPPORTED_VERSION,
        "schemaVersion",
    ),
    ("other.json", json.dumps(_valid()).encode(), ManifestFault.NAME_MISMATCH, "sessionId"),
    (".m-2.abc123.tmp", b'{"schemaVer', ManifestFault.INCOMPLETE_WRITE, ""),
]


@pytest.mark.parametrize(("name", "content", "reason", "detail"), BAD_FILES)
def test_each_bad_file_is_one_problem(
    tmp_path: Path, name: str, content: bytes, reason: ManifestFault, detail: str
) -> None:
    """Every kind of bad file becomes one named problem; good manifests still load."""
    write_manifest(tmp_path, preserved("m-1"))
    (tmp_path / MANIFEST_DIR / name).write_bytes(content)
    result = load_manifests(tmp_path)
    assert result.manifests == (preserved("m-1"),)
    assert [(p.name, p.reason, p.detail) for p in result.errors] == [(name, reason, detail)]
    assert (tmp_path / MANIFEST_DIR / name).read_bytes() == content


def test_unreadable_entry_is_reported(tmp_path: Path) -> None:
    """An entry that cannot be read as a file is reported as unreadable."""
    (tmp_path / MANIFEST_DIR / "m-3.json").mkdir(parents=True)
    result = load_manifests(tmp_path)
    assert [(p.name, p.reason) for p in result.errors] == [("m-3.json", ManifestFault.UNREADABLE)]


def test_unrelated_files_are_ignored(tmp_path: Path) -> None:
    """Files that are neither manifests nor our temporaries are neither loaded nor reported."""
    write_manifest(tmp_path, preserved())
    (tmp_path / MANIFEST_DIR / "README").write_text("notes")
    assert load_manifests(tmp_path).errors == ()


def test_unknown_extra_keys_are_ignored(tmp_path: Path) -> None:
    """A version-1 manifest with an additive key still loads."""
    data = _valid("m-4") | {"futureField": {"x": 1}}
    manifest_path(tmp_path, "m-4").parent.mkdir(parents=True)
    manifest_path(tmp_path, "m-4").write_text(json.dumps(data))
    assert load_manifests(tmp_path).manifests == (preserved("m-4"),)


# --- the value --------------------------------------------------------------------------------


def test_release_time_is_normalised_to_utc() -> None:
    """A release time in another zone is stored as the same instant in UTC."""
    local = T0.astimezone(timezone(timedelta(hours=2)))
    manifest = preserved(released_at=local)
    assert manifest.released_at == T0
    assert manifest.released_at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "change",
    [
        {"released_at": datetime(2026, 8, 15, 9, 30)},
        {"session_id": "../escape"},
        {"session_id": ".hidden"},
        {"base_commit": "HEAD"},
        {"path": "relative/wt"},
        {"branch": ""},
        {"pending_task_ids": ["t-1"]},
    ],
)
def test_value_rejects_unsafe_fields(change: dict[str, Any]) -> None:
    """Naive times, path-like session ids, symbolic commits and relative paths are refused."""
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        preserved(**change)


# --- the contract -----------------------------------------------------------------------------


def test_written_manifest_matches_schema(tmp_path: Path) -> None:
    """The bytes fleetd writes validate against manifest.v1.schema.json."""
    path = write_manifest(tmp_path, preserved(cause=ReleaseCause.RELEASE_WITH_PENDING_TASKS))
    VALIDATOR.validate(json.loads(path.read_text()))


def test_sample_validates_and_decodes() -> None:
    """The contract sample passes the schema and the decoder."""
    sample = json.loads((CONTRACTS / "manifest.v1.sample.json").read_text())
    VALIDATOR.validate(sample)
    assert decode_manifest(sample).session_id == sample["sessionId"]


def test_schema_matches_code() -> None:
    """The schema requires exactly the keys fleetd writes and lists exactly its causes."""
    assert set(SCHEMA["required"]) == set(encode_manifest(preserved()))
    assert SCHEMA["properties"]["cause"]["enum"] == [c.value for c in ReleaseCause]


@pytest.mark.parametrize(
    "mutation",
    [
        {"schemaVersion": 2},
        {"sessionId": "../x"},
        {"baseCommit": "abc"},
        {"path": "relative"},
        {"repository": "relative"},
        {"cause": "exploded"},
        {"releasedAt": "yesterday"},
        {"releasedAt": "2026-08-15T09:30:00"},
        {"branch": ""},
        {"state": ""},
        {"pendingTaskIds": "t-1"},
        {"owner": 7},
    ],
)
def test_schema_and_decoder_agree_on_rejects(mutation: dict[str, Any]) -> None:
    """What the schema rejects, the decoder rejects too."""
    data = _valid() | mutation
    assert not VALIDATOR.is_valid(data)
    with pytest.raises(ValueError):  # noqa: PT011 - the message names the field
        decode_manifest(data)


_ident = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


_manifests = st.builds(
    PreservedWorktree,
    session_id=_ident,
    owner=_text,
    role=_text,
    profile=_text,
    repository=st.just("/srv/repo"),
    path=_ident.map(lambda name: f"/srv/worktrees/{name}"),
    branch=_text.filter(bool),
    base_commit=st.from_regex(r"[0-9a-f]{40}", fullmatch=True),
    cause=st.sampled_from(ReleaseCause),
    released_at=st.datetimes(timezones=st.just(UTC)),
    state=st.sampled_from(["spawning", "ready", "busy", "done", "failed", "released"]),
    pending_task_ids=st.lists(_text, max_size=4).map(tuple),
)


@given(manifest=_manifests)
def test_encode_decode_round_trip(manifest: PreservedWorktree) -> None:
    """Any valid manifest encodes to schema-valid JSON and decodes back to itself."""
    data = json.loads(json.dumps(encode_manifest(manifest)))
    VALIDATOR.validate(data)
    assert decode_manifest(data) == manifest


def test_a_shelf_parses_a_file_again_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading again reads no unchanged file; a new, replaced or removed file shows at once."""
    shelf = manifests_module.ManifestShelf(tmp_path)
    assert shelf.load().manifests == ()
    write_manifest(tmp_path, preserved("m-1"))
    write_manifest(tmp_path, preserved("m-2", released_at=T0 + timedelta(seconds=1)))
    parsed: list[str] = []
    real = manifests_module._load_one

    def counted(file: Path) -> PreservedWorktree:
        parsed.append(file.name)
        return real(file)

    monkeypatch.setattr(manifests_module, "_load_one", counted)
    assert [m.session_id for m in shelf.load().manifests] == ["m-1", "m-2"]
    assert [m.session_id for m in shelf.load().manifests] == ["m-1", "m-2"]
    assert parsed == ["m-1.json", "m-2.json"]  # the second load parsed nothing
    write_manifest(tmp_path, preserved("m-1", state="busy", pending_task_ids=("t-9",)))
    (tmp_path / MANIFEST_DIR / "m-2.json").unlink()
    assert shelf.load().manifests == (preserved("m-1", state="busy", pending_task_ids=("t-9",)),)
    assert parsed[2:] == ["m-1.json"]
