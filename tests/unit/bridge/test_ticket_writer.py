"""The task book is the one writer of a ticket: no other module of the shell assigns its fields.

A ticket's fields say what the lead is told (its outcome, its result, how sure its delivery is)
and what the state store holds. Written from one place, each change goes through the ticket table
(:mod:`fleetd.bridge.ticket_machine`) and is heard by the store and the views; an assignment
elsewhere would bypass all three.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import fleetd
from fleetd.bridge.tasks import Ticket

ROOT = Path(fleetd.__file__).parent
WRITER = ROOT / "bridge" / "tasks.py"
#: where tickets travel: the bridge, the tools that answer with them, the runtime that wires them
SHELL = ("bridge", "api", "runtime")
FIELDS = frozenset(field.name for field in dataclasses.fields(Ticket))
#: assignments to a field of the same name on something that is not a ticket
NOT_TICKETS = frozenset({"api/tools.py: error.hint"})  # a FleetdError's hint


def _assigned(tree: ast.AST) -> Iterator[tuple[int, ast.Attribute]]:
    """Every attribute assigned to (``x.a = …``, ``x.a += …``, ``x.a: T = …``, in tuples too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets.extend(target.elts)
            elif isinstance(target, ast.Attribute):
                yield node.lineno, target


def _ticket_writes(path: Path) -> list[str]:
    writes = []
    for line, target in _assigned(ast.parse(path.read_text(), filename=str(path))):
        owner = target.value
        if target.attr in FIELDS and not (isinstance(owner, ast.Name) and owner.id == "self"):
            writes.append(f"{path.relative_to(ROOT)}:{line}: {ast.unparse(target)}")
    return writes


def test_no_module_but_the_task_book_writes_a_ticket() -> None:
    """No module of the bridge, the tools or the runtime but the task book assigns a field of a
    ticket."""
    writes = [
        write
        for part in SHELL
        for path in sorted((ROOT / part).rglob("*.py"))
        if path != WRITER
        for write in _ticket_writes(path)
        if _unnumbered(write) not in NOT_TICKETS
    ]
    assert writes == []


def _unnumbered(write: str) -> str:
    where, _line, expression = write.split(":", 2)
    return f"{where}:{expression}"


def test_the_scan_sees_the_task_books_own_writes() -> None:
    """The scan finds writes where they are (else the test above could pass on a blind scan)."""
    found = {write.rsplit(": ", 1)[1] for write in _ticket_writes(WRITER)}
    assert {"ticket.outcome", "ticket.stored", "ticket.late_reply", "ticket.counted"} <= found
