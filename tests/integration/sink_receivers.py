"""Local receivers that check fleetd's requests against the destination kinds' public docs, field
by field, and answer as the real service documents (a :class:`HookServer` ``judge``).

* :func:`pagerduty_judge` — PagerDuty Events API v2 ``POST /v2/enqueue``: ``routing_key`` (the
  integration key), ``event_action`` (``trigger`` | ``acknowledge`` | ``resolve``),
  ``dedup_key`` (at most 255, required unless triggering), and for a trigger ``payload`` with
  ``summary`` (at most 1024), ``source``, ``severity`` (``critical`` | ``error`` | ``warning`` |
  ``info``) and optional ``timestamp``, ``component``, ``group``, ``class``,
  ``custom_details``; ``client`` and ``client_url`` optional. 202 ``{"status": "success",
  "message": "Event processed", "dedup_key": …}``; anything else 400 ``{"status": "invalid
  event", "message": "Event object is invalid", "errors": [...]}``.
* :func:`slack_judge` — a Slack incoming webhook: a JSON object with ``text`` and/or
  ``blocks`` (each block ``header`` with ``plain_text`` of at most 150, ``section`` with a text
  object of at most 3000, ``context`` with at most 10 elements); 200 ``ok``, else 400
  ``invalid_payload``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tests.integration.hook_server import Received, Reply

__all__ = ["pagerduty_judge", "pagerduty_problems", "slack_judge", "slack_problems"]

_PD_FIELDS = {"routing_key", "event_action", "dedup_key", "payload", "images", "links"}
_PD_FIELDS |= {"client", "client_url"}
_PD_PAYLOAD = {"summary", "source", "severity", "timestamp", "component", "group", "class"}
_PD_PAYLOAD |= {"custom_details"}


def _json(received: Received) -> Any:
    try:
        return json.loads(received.body)
    except ValueError:
        return None


def pagerduty_problems(received: Received, *, routing_key: str) -> list[str]:
    """What PagerDuty would refuse in this enqueue request (empty: it is valid)."""
    problems = []
    if received.method != "POST" or received.path != "/v2/enqueue":
        problems.append(f"{received.method} {received.path} is not POST /v2/enqueue")
    if received.headers.get("content-type") != "application/json":
        problems.append("content-type is not application/json")
    event = _json(received)
    if not isinstance(event, dict):
        return [*problems, "the body is not a JSON object"]
    problems += [f"unknown field {name}" for name in set(event) - _PD_FIELDS]
    if event.get("routing_key") != routing_key:
        problems.append("'routing_key' is invalid")
    action = event.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        problems.append("'event_action' is invalid")
    dedup = event.get("dedup_key")
    if dedup is not None and not (isinstance(dedup, str) and 0 < len(dedup) <= 255):
        problems.append("'dedup_key' is invalid")
    if action in ("acknowledge", "resolve") and dedup is None:
        problems.append("'dedup_key' is required")
    if action == "trigger":
        problems += _pagerduty_payload(event.get("payload"))
    return problems


def _pagerduty_payload(payload: Any) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is required"]
    problems = [f"unknown payload field {name}" for name in set(payload) - _PD_PAYLOAD]
    summary = payload.get("summary")
    if not (isinstance(summary, str) and 0 < len(summary) <= 1024):
        problems.append("'payload.summary' is invalid")
    if not (isinstance(payload.get("source"), str) and payload["source"]):
        problems.append("'payload.source' is required")
    if payload.get("severity") not in ("critical", "error", "warning", "info"):
        problems.append("'payload.severity' is invalid")
    if "timestamp" in payload:
        try:
            datetime.fromisoformat(payload["timestamp"])
        except (TypeError, ValueError):
            problems.append("'payload.timestamp' is invalid")
    for name in ("component", "group", "class"):
        if name in payload and not isinstance(payload[name], str):
            problems.append(f"'payload.{name}' is invalid")
    if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
        problems.append("'payload.custom_details' is invalid")
    return problems


def pagerduty_judge(routing_key: str) -> Any:
    """A judge answering as the Events API does for the integration ``routing_key``."""

    def judge(received: Received) -> Reply:
        problems = pagerduty_problems(received, routing_key=routing_key)
        headers = {"content-type": "application/json"}
        if problems:
            body = {
                "status": "invalid event",
                "message": "Event object is invalid",
                "errors": problems,
            }
            return Reply(status=400, headers=headers, body=json.dumps(body).encode())
        dedup = json.loads(received.body).get("dedup_key")
        body = {"status": "success", "message": "Event processed", "dedup_key": dedup}
        return Reply(status=202, headers=headers, body=json.dumps(body).encode())

    return judge


def slack_problems(received: Received) -> list[str]:
    """What Slack would call ``invalid_payload`` in this message (empty: it is valid)."""
    if received.method != "POST":
        return ["not a POST"]
    if not received.headers.get("content-type", "").startswith("application/json"):
        return ["content-type is not application/json"]
    message = _json(received)
    if not isinstance(message, dict) or not (message.get("text") or message.get("blocks")):
        return ["no_text"]
    problems = []
    if "text" in message and not isinstance(message["text"], str):
        problems.append("text is not a string")
    for block in message.get("blocks", []):
        problems += _slack_block(block)
    return problems


def _text_object(value: Any, *, kinds: tuple[str, ...], limit: int) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in kinds
        and isinstance(value.get("text"), str)
        and 0 < len(value["text"]) <= limit
    )


def _slack_block(block: Any) -> list[str]:
    if not isinstance(block, dict):
        return ["a block is not an object"]
    kind = block.get("type")
    if kind == "header":
        ok = _text_object(block.get("text"), kinds=("plain_text",), limit=150)
    elif kind == "section":
        ok = _text_object(block.get("text"), kinds=("plain_text", "mrkdwn"), limit=3000)
    elif kind == "context":
        elements = block.get("elements")
        ok = (
            isinstance(elements, list)
            and 0 < len(elements) <= 10
            and all(_text_object(e, kinds=("plain_text", "mrkdwn"), limit=3000) for e in elements)
        )
    else:
        ok = False
    return [] if ok else [f"invalid {kind} block"]


def slack_judge(received: Received) -> Reply:
    """Answers as an incoming webhook does: 200 ``ok``, or 400 ``invalid_payload``."""
    if slack_problems(received):
        return Reply(status=400, body=b"invalid_payload")
    return Reply(status=200, headers={"content-type": "text/html"}, body=b"ok")
