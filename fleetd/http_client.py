"""The httpx client of fleetd's outbound HTTP calls: the webhook sender and the model catalog probe.

Both adapters build their client here, so both get the same three rules:

* redirects are not followed (a request would reach a URL nobody configured) and the environment
  is not consulted (``trust_env=False``: no proxy variables, no ``.netrc`` credentials);
* the adapter names itself in ``User-Agent``;
* **httpx and httpcore never log.** httpx writes ``HTTP Request: POST <url> ...`` at INFO for
  every request, and httpcore traces each connection at DEBUG. A webhook URL is a secret (Slack
  and n8n URLs carry their token in the path), and nothing may write it to a log at any level
  (invariant 5). :func:`silence_http_logs` takes both libraries' loggers out of the logging tree:
  they log nowhere (a :class:`logging.NullHandler`, no propagation to the root's handlers) and
  nothing below ``CRITICAL`` is even formatted. A logging setup that runs later — uvicorn's
  ``dictConfig`` with ``disable_existing_loggers=False``, a test's ``caplog`` at DEBUG — leaves
  that alone: it resets only the ``disabled`` flag of loggers it does not name, never a logger's
  level, handlers or propagation.

:func:`silence_http_logs` runs whenever a client is built here and again when ``fleetd serve``
configures logging; it is idempotent. Nothing runs at import.
"""

from __future__ import annotations

import logging
from typing import Final

import httpx

__all__ = ["HTTP_LOGGERS", "outbound_client", "silence_http_logs"]

HTTP_LOGGERS: Final = ("httpx", "httpcore")
"""The loggers (with every child, such as ``httpcore.http11``) that never reach a handler."""


def silence_http_logs() -> None:
    """Detach httpx's and httpcore's loggers from every handler (see the module docstring)."""
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
        if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
            logger.addHandler(logging.NullHandler())


def outbound_client(user_agent: str) -> httpx.AsyncClient:
    """A client for one outbound adapter: no redirects, no environment, no logs."""
    silence_http_logs()
    return httpx.AsyncClient(
        follow_redirects=False, trust_env=False, headers={"user-agent": user_agent}
    )
