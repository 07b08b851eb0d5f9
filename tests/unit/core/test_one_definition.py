"""One definition each: "at its prompt" and the config's durations are not re-derived.

Checked on the source of every module under ``fleetd/`` with :mod:`ast`:

* whether a herdr status means "the agent sits at its prompt" is
  :attr:`fleetd.herdr.model.AgentStatus.at_prompt`; no other module spells the set of
  ``AgentStatus.IDLE`` and ``AgentStatus.DONE`` again;
* a configured duration is read through its config property (``readiness_grace``,
  ``submit_retry``, ``snapshot_interval`` …); outside :mod:`fleetd.config` no module reads the raw
  ``*_seconds`` / ``*_ms`` field behind such a property and converts it itself.

(``fleetd.health`` keeps its own ``AT_PROMPT`` over its own ``LiveStatus``: it imports nothing of
fleetd, so it cannot share herdr's enum.)
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import fleetd
from fleetd.config import model as config_model
from fleetd.config import sections as config_sections
from fleetd.config.fields import ConfigModel

ROOT = Path(fleetd.__file__).parent
AT_PROMPT_HOME = ROOT / "herdr" / "model.py"
CONFIG = ROOT / "config"


def duration_fields() -> frozenset[str]:
    """Every config field ``<name>_seconds`` / ``<name>_ms`` that has a ``<name>`` property."""
    fields: set[str] = set()
    for module in (config_model, config_sections):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, ConfigModel):
                continue
            for field in cls.model_fields:
                stem = field.removesuffix("_seconds").removesuffix("_ms")
                if stem != field and isinstance(inspect.getattr_static(cls, stem, None), property):
                    fields.add(field)
    return frozenset(fields)


def _is_status(node: ast.expr, member: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == member
        and isinstance(node.value, ast.Name)
        and node.value.id == "AgentStatus"
    )


def _elements(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        return list(node.elts)
    return []


def at_prompt_sets(source: str) -> Iterator[int]:
    """Lines where a set, tuple or list holds exactly ``AgentStatus.IDLE`` and ``.DONE``."""
    for node in ast.walk(ast.parse(source)):
        elements = _elements(node)
        if len(elements) == 2 and {
            member for member in ("IDLE", "DONE") if any(_is_status(e, member) for e in elements)
        } == {"IDLE", "DONE"}:
            yield getattr(node, "lineno", 0)


def raw_duration_reads(source: str, fields: frozenset[str]) -> Iterator[tuple[int, str]]:
    """Lines where a raw duration field behind a config property is read."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in fields:
            yield node.lineno, node.attr


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted(ROOT.rglob("*.py")):
        yield path, path.read_text()


def test_the_scans_see_what_they_look_for() -> None:
    """The scans find an at-prompt set written out and a raw duration field read, and nothing
    else."""
    source = (
        "_AT_PROMPT = frozenset({AgentStatus.IDLE, AgentStatus.DONE})\n"
        "ok = status in (AgentStatus.DONE, AgentStatus.IDLE)\n"
        "wider = (AgentStatus.IDLE, AgentStatus.DONE, AgentStatus.BLOCKED)\n"
        "grace = timedelta(seconds=settings.bridge.readiness_grace_seconds)\n"
        "fine = settings.bridge.readiness_grace\n"
    )
    assert list(at_prompt_sets(source)) == [1, 2]
    fields = duration_fields()
    assert {"readiness_grace_seconds", "submit_retry_ms", "snapshot_interval_seconds"} <= fields
    assert "max_scrape_chars" not in fields
    assert list(raw_duration_reads(source, fields)) == [(4, "readiness_grace_seconds")]


def test_at_prompt_is_defined_once() -> None:
    """No module outside its home spells out the at-prompt status set; they use
    AgentStatus.at_prompt."""
    found = [
        f"{path.relative_to(ROOT.parent)}:{line}"
        for path, source in _sources()
        if path != AT_PROMPT_HOME
        for line in at_prompt_sets(source)
    ]
    assert found == [], "use AgentStatus.at_prompt instead of re-defining it"


def test_config_durations_are_read_through_their_properties() -> None:
    """Outside fleetd/config no module converts a raw duration field; it reads the timedelta
    property."""
    fields = duration_fields()
    found = [
        f"{path.relative_to(ROOT.parent)}:{line} {field}"
        for path, source in _sources()
        if not path.is_relative_to(CONFIG)
        for line, field in raw_duration_reads(source, fields)
    ]
    assert found == [], "read the config's timedelta property instead of converting the raw field"
