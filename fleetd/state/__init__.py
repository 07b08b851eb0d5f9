"""The bridge's state store: what a restart of ``fleetd serve`` needs to lose nothing.

Members (with the SHA-256 hash of their token, never the token), tickets (a queued prompt until
it is about to be typed, then never again; the outcome once it ends), open turns, and the instance
row of the one process that may write. The bridge writes each record *before* the effect it
causes runs (:mod:`fleetd.state.writer`); at start fleetd loads them and adopts the members herdr
still lists (:mod:`fleetd.state.adopt`). It is not the incident journal, and nothing in it goes
outbound.
"""
