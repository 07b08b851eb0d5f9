"""The model catalog side: the probe of each provider's model list, and the ``dependencies``
view over it and the inbox, with the dependency series registered on the service's metrics."""

from __future__ import annotations

from collections.abc import Mapping

from fleetd.catalog.http import HttpModelCatalog
from fleetd.catalog.port import ModelCatalog
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import Clock
from fleetd.config import ConfigRef
from fleetd.inbox.port import ReplyInbox
from fleetd.metrics import Metrics
from fleetd.runtime import DependencyCollector, DependencyView

__all__ = ["model_health"]


def model_health(
    config: ConfigRef,
    *,
    environ: Mapping[str, str],
    clock: Clock,
    inbox: ReplyInbox,
    metrics: Metrics,
    catalog: ModelCatalog | None = None,
) -> tuple[ModelHealth, DependencyView]:
    """The catalog probe (over httpx unless ``catalog`` is given) and the dependencies view, its
    series registered on ``metrics``."""
    models = ModelHealth(
        catalog=catalog or HttpModelCatalog(clock=clock),
        clock=clock,
        settings=lambda: config.current,
        environ=environ,
    )
    dependencies = DependencyView(inbox=inbox, models=models, clock_now=clock.now)
    metrics.registry.register(DependencyCollector(dependencies))
    return models, dependencies
