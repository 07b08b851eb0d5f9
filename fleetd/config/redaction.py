"""The secret values a running config names, so text that may show them can take them out.

A secret never enters the config file: the file names environment variables (lead and operator
tokens, the webhook signing secret and URLs (Slack's among them), the PagerDuty routing key,
provider API keys, the journal URL) and holds URLs that may carry credentials (brokers, the
journal). :func:`secret_values` returns those values, as
they are in effect, for redaction only (the pane excerpt of :mod:`fleetd.screens.excerpt`): they
are never logged, shown or sent anywhere. An unset variable names nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetd.config.model import FleetdConfig

__all__ = ["secret_values"]


def secret_values(config: FleetdConfig, environ: Mapping[str, str]) -> tuple[str, ...]:
    """Every secret ``config`` reads from ``environ`` or holds, each once, longest first."""
    notifications = config.health.notifications
    variables: list[str | None] = [lead.token_env for lead in config.leads]
    variables += [config.operator_token_env, notifications.secret_env]
    variables.append(notifications.routing_key_env)
    variables += list(notifications.receiver_envs)
    variables += [provider.api_key_env for provider in config.providers]
    values = {environ.get(name, "") for name in variables if name is not None}
    values.add(config.journal.url.get_secret_value())
    values.update(config.inbox.amqp.endpoints)
    return tuple(sorted((v for v in values if v), key=lambda v: (-len(v), v)))
