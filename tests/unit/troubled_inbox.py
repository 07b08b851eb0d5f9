"""An in-memory reply inbox a test can take down and fill with entries it could not decode."""

from __future__ import annotations

from fleetd.errors import InboxUnavailableError
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord

__all__ = ["TroubledInbox"]


class TroubledInbox(InMemoryInbox):
    """While ``down`` it refuses to publish (records wait in fleetd's memory) and reads as
    unreachable; ``bad`` holds the decode failures it reports."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.bad: list[DecodeFailure] = []

    async def publish(self, record: InboxRecord) -> bool:
        if self.down:
            raise InboxUnavailableError("the broker is away")
        return await super().publish(record)

    def failures(self) -> list[DecodeFailure]:
        return list(self.bad)

    def reachable(self) -> bool:
        return not self.down and super().reachable()
