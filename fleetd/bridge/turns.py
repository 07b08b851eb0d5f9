"""Accepted turns: the token that ties a send to its waiter and its delivery baseline.

Every accepted send that reaches a member gets a :class:`TurnToken` at delivery. The token names
the target, the ticket (the exact waiter) and the session turn it opened. Right after the prompt is
sent, and before delivery is declared complete, the injector captures a :class:`DeliveryBaseline`:
the last assistant block on screen, normalised and clipped, with whether an assistant marker was
recognised. The baseline is evidence for a later lost-boundary repair; a missing, failed or late
baseline never authorises one.

The open turn of a member is a frozen :class:`TurnState` that only the turn machine's ``step``
makes (:mod:`fleetd.bridge.turn_machine`, where these values live): its phase (working seen, a
boundary seen, restored), whether Enter was re-submitted, when a boundary was first seen, its
:class:`BoundaryWatch` of every raw status observation (from the poller, the health monitor's
fleet list and the repair's own fresh lookup) and its :class:`RepairLedger` of what lost-boundary
repair answered for its token so far (M4 §8.3–§8.4).
"""

from __future__ import annotations

from fleetd.bridge.turn_machine import (
    BaselineCapture,
    BoundaryWatch,
    DeliveryBaseline,
    RepairLedger,
    TurnPhase,
    TurnState,
    TurnToken,
)

__all__ = [
    "BaselineCapture",
    "BoundaryWatch",
    "DeliveryBaseline",
    "RepairLedger",
    "TurnPhase",
    "TurnState",
    "TurnToken",
]
