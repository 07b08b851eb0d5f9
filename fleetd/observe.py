"""One chokepoint per port: what runs around every call of an adapter.

A port whose calls something must see — the herdr control link's observer, the incident
journal's health and timings — gives each adapter one chokepoint and lets the composition root
hand it an :class:`Around` once (``adapter.observe(around)``). Nothing wraps the adapter and
forwards its methods: the adapter's own methods run through the chokepoint, labelled with the
port method's name. :func:`observed` is that chokepoint for an adapter whose port methods are
coroutines; the herdr control has its own (every method builds one call and sends it through
:meth:`~fleetd.herdr.control.HerdrAgentControl.call`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

__all__ = ["Around", "Observable", "direct", "observed"]

T = TypeVar("T")
P = ParamSpec("P")


class Around(Protocol):
    """What runs around every port call: ``method`` is the port method's name (``"prompt"``)."""

    async def __call__(self, method: str, call: Awaitable[T], /) -> T: ...


async def direct(method: str, call: Awaitable[T], /) -> T:
    """The :class:`Around` of an unobserved port: the call itself."""
    return await call


class Observable(Protocol):
    """An adapter whose port methods run through :func:`observed` (``around`` starts as
    :func:`direct`; :meth:`observe` replaces it)."""

    around: Around

    def observe(self, around: Around) -> None: ...


A = TypeVar("A", bound=Observable)


def observed(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[A, P], Coroutine[Any, Any, T]]:
    """Run the port method through its adapter's :class:`Around`, named by the method."""
    name = method.__name__

    @functools.wraps(method)
    async def call(self: A, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.around(name, method(self, *args, **kwargs))

    return call
