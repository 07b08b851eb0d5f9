"""A member's pane, known by the workspace fleetd made for it.

Every member's workspace is created labelled with the member's agent name
(:func:`~fleetd.bridge.spawn.spawn_member`). A pane id is only herdr's numbering: herdr that
restarted numbers its workspaces from the start again and gives a member's old pane id to whatever
it makes next — a person's shell, another member. So fleetd closes a member's pane only while herdr
lists it in the workspace labelled with the member's name, never by its id alone.
"""

from __future__ import annotations

from fleetd.errors import TargetNotFoundError
from fleetd.herdr.control import AgentControl

__all__ = ["close_own_pane"]


async def close_own_pane(control: AgentControl, name: str, pane_id: str) -> None:
    """Close ``pane_id`` if herdr has it under the label ``name``; nothing when it does not (the
    member's pane is gone, and a pane of that id now is not the member's). Raises
    :class:`~fleetd.errors.HerdrError` when herdr cannot say or did not close it."""
    if pane_id not in {pane.pane_id for pane in await control.labelled_panes(name)}:
        return
    try:
        await control.close_pane(pane_id)
    except TargetNotFoundError:
        return  # gone meanwhile
