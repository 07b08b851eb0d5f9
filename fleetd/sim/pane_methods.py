"""herdr's ``pane.*`` one-shot methods over the simulated :class:`~fleetd.sim.world.World`.

Reading (:func:`read_pane`, shared with ``agent.read`` and the output subscriptions), typing into
a pane (an agent's pane hands text and keys to the agent; a shell pane runs a command on Enter),
splitting, closing, and the process info herdr reports for a shell or an agent. Focusing marks an
agent seen (``done`` becomes ``idle``); reading does not.
"""

from __future__ import annotations

from fleetd.errors import HerdrError
from fleetd.herdr.model import ReadSource
from fleetd.herdr.rules import is_valid_key
from fleetd.sim import screens
from fleetd.sim.agent import SimAgent
from fleetd.sim.requests import Handler, Params
from fleetd.sim.state import JsonObject, Pane
from fleetd.sim.world import World

__all__ = ["VISIBLE_ROWS", "PaneMethods", "checked_keys", "read_pane"]

VISIBLE_ROWS = 40
_RECENT_DEFAULT = 80
_RECENT_CAP = 1000


def checked_keys(keys: list[str]) -> list[str]:
    """``keys``, or ``invalid_key`` for the first one herdr's key grammar refuses."""
    for key in keys:
        if not is_valid_key(key):
            raise HerdrError("invalid_key", f"unknown key {key!r}")
    return keys


def read_pane(
    pane: Pane[SimAgent], source: ReadSource, lines: int | None, fmt: str = "text"
) -> JsonObject:
    """``pane.read``'s ``read`` object for ``source`` (see PROTOCOL.md §7 "Reading output")."""
    screen = pane.screen[-VISIBLE_ROWS:]
    if source is ReadSource.VISIBLE:
        full = screen
        rows = full if lines is None else full[len(full) - min(lines, len(full)) :]
    elif source is ReadSource.DETECTION:
        full = list(screen)
        while full and not full[-1].strip():
            full.pop()
        rows = full
    else:
        full = [*pane.scrollback, *screen]
        wanted = min(_RECENT_CAP, _RECENT_DEFAULT if lines is None else lines)
        rows = full[len(full) - min(wanted, len(full)) :]
    return {
        "pane_id": pane.pane_id,
        "workspace_id": pane.workspace_id,
        "tab_id": pane.tab_id,
        "source": str(source),
        "format": fmt,
        "text": "\n".join(rows),
        "revision": 0,
        "truncated": len(rows) < len(full),
    }


class PaneMethods:
    """``pane.list`` … ``pane.process_info``."""

    def __init__(self, world: World) -> None:
        self.world = world

    def table(self) -> dict[str, Handler]:
        """The methods by herdr name."""
        return {
            "pane.list": self.pane_list,
            "pane.get": self.pane_get,
            "pane.current": self.pane_get_current,
            "pane.focus": self.pane_focus,
            "pane.read": self.pane_read,
            "pane.send_text": self.pane_send_text,
            "pane.send_keys": self.pane_send_keys,
            "pane.send_input": self.pane_send_input,
            "pane.split": self.pane_split,
            "pane.close": self.pane_close,
            "pane.process_info": self.pane_process_info,
        }

    def pane_list(self, p: Params) -> JsonObject:
        ws_id = p.opt_text("workspace_id")
        if ws_id is not None:
            self.world.workspace(ws_id)
        panes = [
            self.world.pane_wire(pane)
            for pane in self.world.panes.values()
            if ws_id is None or pane.workspace_id == ws_id
        ]
        return {"type": "pane_list", "panes": panes}

    def pane_get(self, p: Params) -> JsonObject:
        return {
            "type": "pane_info",
            "pane": self.world.pane_wire(self.world.pane(p.text("pane_id"))),
        }

    def pane_get_current(self, p: Params) -> JsonObject:
        pane_id = p.opt_text("caller_pane_id") or self.world.focused_pane_id or ""
        return {"type": "pane_current", "pane": self.world.pane_wire(self.world.pane(pane_id))}

    def pane_focus(self, p: Params) -> JsonObject:
        self.world.focus_pane(self.world.pane(p.text("pane_id")))
        return {"type": "ok"}

    def pane_read(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        fmt = p.opt_text("format") or "text"
        return {"type": "pane_read", "read": read_pane(pane, p.source(), p.opt_int("lines"), fmt)}

    def _type_into(self, pane: Pane[SimAgent], text: str, *, newline_is_enter: bool) -> None:
        pieces = text.split("\n") if newline_is_enter else [text]
        for i, piece in enumerate(pieces):
            if i:
                self._press(pane, ["enter"])
            if pane.agent is not None:
                pane.agent.type(piece)
            else:
                pane.input_buffer += piece

    def _press(self, pane: Pane[SimAgent], keys: list[str]) -> None:
        if pane.agent is not None:
            pane.agent.press(keys)
            return
        for key in keys:
            if key.lower() in ("enter", "return"):
                command, pane.input_buffer = pane.input_buffer, ""
                prompt = f"sim@herdr:{pane.cwd or '~'}$ "
                pane.shell_history.append(prompt + command)
                pane.screen = screens.shell(pane.cwd, pane.shell_history[-(VISIBLE_ROWS - 1) :])
            elif len(key) == 1:
                pane.input_buffer += key

    def pane_send_text(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        self._type_into(pane, p.text("text"), newline_is_enter=True)
        return {"type": "ok"}

    def pane_send_keys(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        self._press(pane, checked_keys(p.strings("keys", required=True)))
        return {"type": "ok"}

    def pane_send_input(self, p: Params) -> JsonObject:
        pane = self.world.pane(p.text("pane_id"))
        keys = checked_keys(p.strings("keys"))
        self._type_into(pane, p.opt_text("text") or "", newline_is_enter=False)
        self._press(pane, keys)
        return {"type": "ok"}

    def pane_split(self, p: Params) -> JsonObject:
        direction = p.text("direction")
        if direction not in ("right", "down"):
            raise HerdrError("invalid_request", f"invalid request: unknown variant `{direction}`")
        pane = self.world.split(
            target_pane_id=p.opt_text("target_pane_id"),
            workspace_id=p.opt_text("workspace_id"),
            cwd=p.opt_text("cwd"),
            env=p.env(),
            focus=p.flag("focus"),
        )
        return {"type": "pane_info", "pane": self.world.pane_wire(pane)}

    def pane_close(self, p: Params) -> JsonObject:
        self.world.close_pane(p.text("pane_id"))
        return {"type": "ok"}

    def pane_process_info(self, p: Params) -> JsonObject:
        pane_id = p.opt_text("pane_id") or self.world.focused_pane_id or ""
        pane = self.world.pane(pane_id)
        agent = pane.agent
        if agent is None:
            proc: JsonObject = {"pid": pane.shell_pid, "name": "bash", "argv": ["bash"]}
            group = pane.shell_pid
        else:
            argv = [agent.kind, *agent.args]
            proc = {
                "pid": pane.shell_pid + 1,
                "name": agent.kind,
                "argv": argv,
                "argv0": agent.kind,
            }
            group = pane.shell_pid + 1
        proc["cmdline"] = " ".join(proc["argv"])
        if pane.cwd:
            proc["cwd"] = pane.cwd
        info = {
            "pane_id": pane.pane_id,
            "shell_pid": pane.shell_pid,
            "foreground_process_group_id": group,
            "tty": f"/dev/pts/{pane.shell_pid % 100}",
            "foreground_processes": [proc],
        }
        return {"type": "pane_process_info", "process_info": info}
