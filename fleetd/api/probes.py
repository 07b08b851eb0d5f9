"""The bodies of ``/healthz`` and ``/readyz``, as the models that build and describe them.

Each body is built as its model (:meth:`~fleetd.bridge.answers.WireModel.of`, no validation) and
sent as its wire JSON (:func:`~fleetd.bridge.answers.wire`): camelCase, only the fields it was
given, in the order the model declares them. The routes name the models in their ``responses``,
so ``/openapi.json`` describes the bodies it sends.

``/healthz``'s components come from where they are known: the control link from the health
monitor (:class:`ControlLinkComponent`, the link with its health+json word first), the inbox
from the fleet view (:class:`~fleetd.runtime.InboxComponent`), ``fleetHealth`` from the monitor
(:class:`~fleetd.runtime.FleetHealthComponent`); the config and the loops are read here. The
top-level ``status`` is ``warn`` while a component with a health+json status warns or fails,
else ``pass`` (see :mod:`fleetd.api.app` for why never ``fail``); ``fleetHealth`` speaks coverage
words (§10.2), and does not count.
"""

from __future__ import annotations

from typing import Literal

from fleetd.bridge.answers import Absent, WireModel
from fleetd.runtime import ControlLink, DependencyReadiness, FleetHealthComponent, InboxComponent

__all__ = [
    "ConfigComponent",
    "ControlLinkComponent",
    "HealthzAnswer",
    "HealthzComponents",
    "LoopComponent",
    "ReadyzAnswer",
    "control_link_component",
    "healthz_answer",
]

Status = Literal["pass", "warn", "fail"]

_LINK_STATUS: dict[str, Status] = {"up": "pass", "down": "fail", "unknown": "warn"}


class _Status(WireModel):
    """A component's health+json status, first in its object."""

    status: Status


class ControlLinkComponent(ControlLink, _Status):
    """The ``controlLink`` component: ``status`` (``up`` pass, ``down`` fail, ``unknown``
    warn), then the control link as ``fleet_list`` shows it. (Pydantic lays the bases' fields
    out from the last base to the first, so ``status`` comes first.)"""


class ConfigComponent(WireModel):
    """The ``config`` component: ``warn`` while the last reload was rejected; the restart-only
    keys whose new value waits for a restart."""

    status: Literal["pass", "warn"]
    pending_restart_keys: list[str]


class LoopComponent(WireModel):
    """One scheduler loop: its name, the steps it ran and how many of them failed."""

    name: str
    steps: int
    failures: int


class HealthzComponents(WireModel):
    """``/healthz``'s nested components."""

    control_link: ControlLinkComponent
    inbox: InboxComponent
    config: ConfigComponent
    loops: list[LoopComponent]
    fleet_health: FleetHealthComponent


class HealthzAnswer(WireModel):
    """``/healthz`` (``application/health+json``): always HTTP 200; ``warn`` while a component
    warns or fails, else ``pass``."""

    status: Literal["pass", "warn"]
    components: HealthzComponents


class ReadyzAnswer(WireModel):
    """``/readyz`` (``application/health+json``): ``pass`` with HTTP 200, ``fail`` with 503."""

    status: Literal["pass", "fail"]
    inbox_reachable: bool
    dependencies: DependencyReadiness | Absent = None


def control_link_component(link: ControlLink) -> ControlLinkComponent:
    """The ``controlLink`` component of ``link``: its status word, then the fields it was given."""
    fields = {name: getattr(link, name) for name in link.model_fields_set}
    return ControlLinkComponent.of(status=_LINK_STATUS[link.state], **fields)


def healthz_answer(components: HealthzComponents) -> HealthzAnswer:
    """``/healthz`` of ``components``, with the top-level status they make."""
    statuses = {components.control_link.status, components.inbox.status, components.config.status}
    return HealthzAnswer.of(
        status="warn" if statuses & {"warn", "fail"} else "pass", components=components
    )
