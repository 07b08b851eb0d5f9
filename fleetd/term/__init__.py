"""The terminal: ``fleetd status``, ``fleetd top`` and ``fleetd incidents`` over HTTP.

:mod:`fleetd.term.view` draws the screens from fleetd's JSON (pure), :mod:`fleetd.term.client`
reads it, :mod:`fleetd.term.commands` and :mod:`fleetd.term.top` are the thin commands.
"""
