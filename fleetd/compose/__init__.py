"""The composition root: the one place that builds fleetd, split by what things are.

* :mod:`.build` — :func:`build_service`, which builds every side and hands each what it needs;
* :mod:`.service` — :class:`Fleetd`, everything one process runs: start, reload, stop;
* :mod:`.loops` — the loops it runs and how often;
* :mod:`.herdr_side`, :mod:`.inbox_side`, :mod:`.journal_side`, :mod:`.catalog_side`,
  :mod:`.api_side` — the adapters each side is built from, with their hot settings;
* :mod:`.series` — the metrics fed from the running parts, every labelled series from the start.

Nothing here runs at import; only the entry points (``cli``, the demo) and the test harness import
this package.
"""

from __future__ import annotations

from fleetd.compose.build import build_service
from fleetd.compose.inbox_side import build_inbox
from fleetd.compose.loops import WEBHOOK_PASS_SECONDS
from fleetd.compose.service import Fleetd

__all__ = ["WEBHOOK_PASS_SECONDS", "Fleetd", "build_inbox", "build_service"]
