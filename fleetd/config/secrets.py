"""``WebhookSecret``: the signing key of the human webhook, as the config reads it.

The secret is written ``whsec_<base64>`` (Standard Webhooks); the key is the decoded bytes, at
least :data:`MIN_SECRET_BYTES`. It lives in ``config/`` because the config checks it when it is
loaded; :mod:`fleetd.notify.core.signing` signs with it. Its ``repr`` and ``str`` never show the
bytes,
and no error repeats the text.

Pure: standard library only.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MIN_SECRET_BYTES", "SECRET_PREFIX", "WebhookSecret"]

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the scheme's marker, not a secret
MIN_SECRET_BYTES: Final = 24
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")


@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """A signing key. Its ``repr`` and ``str`` never show the bytes."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) < MIN_SECRET_BYTES:
            raise ValueError(f"a webhook secret needs at least {MIN_SECRET_BYTES} bytes")

    @classmethod
    def parse(cls, text: str) -> WebhookSecret:
        """Read ``whsec_<base64>`` (padding optional). The error never repeats the text."""
        refusal = (
            f"a webhook secret is {SECRET_PREFIX!r} followed by the base64 of at least "
            f"{MIN_SECRET_BYTES} bytes"
        )
        encoded = text.strip().removeprefix(SECRET_PREFIX)
        if not text.strip().startswith(SECRET_PREFIX) or not _BASE64.fullmatch(encoded):
            raise ValueError(refusal)
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(refusal) from None
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(refusal)
        return cls(key)

    def encoded(self) -> str:
        """The ``whsec_<base64>`` spelling (for writing a receiver's config, never for logs)."""
        return SECRET_PREFIX + base64.b64encode(self.key).decode("ascii")
