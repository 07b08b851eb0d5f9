"""The live configuration: :class:`ConfigRef` and its reload rule.

Loops read ``ref.current`` on every tick, so a hot key takes effect on the next tick after a
reload. Reloading is polled, not watched: the runtime calls :meth:`ConfigRef.reload` each tick,
which costs one ``stat`` while nothing changed. The file is re-read only when its mtime or size
moved (or :meth:`ConfigRef.request_reload` asked, e.g. on SIGHUP), and re-parsed only when its
content hash differs from both the running version and the last rejected one, so an edit is
applied or reported exactly once.

A new version is validated completely before anything changes. It must also be a plausible edit
of a running fleet: a file that holds no settings (empty, or caught mid-write) or that lists no
lead while leads are running is refused, since applying it would lock every caller out; a
restart is the way to run without leads. A token variable that is unset or unusable is refused
like any invalid key (see :mod:`fleetd.config.loader`). An invalid version leaves the running
config in place and is reported: a ``REJECTED`` result, :attr:`ConfigRef.last_reload_error`, the
:attr:`ConfigRef.reload_failures` counter, and one WARN. A valid one applies its hot keys at once;
a changed restart-only key (:data:`~fleetd.config.model.RESTART_KEYS`) keeps the value fleetd
started with and is listed as pending until a restart, or until the file agrees again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from fleetd.config.keys import flatten, get_value, iter_keys, replace_value
from fleetd.config.loader import (
    FileFingerprint,
    LoadedConfig,
    load_config,
    parse_config_bytes,
    read_config_bytes,
)
from fleetd.config.model import RESTART_KEYS, FleetdConfig
from fleetd.config.redaction import secret_values
from fleetd.errors import ConfigError

__all__ = ["ConfigRef", "ConfigStatus", "ReloadResult", "ReloadStatus"]

_log = logging.getLogger("fleetd.config")
_NO_LEADS = (
    "a reload may not remove every lead, which would lock them all out; "
    "restart fleetd to run without leads"
)


class ReloadStatus(StrEnum):
    UNCHANGED = "unchanged"
    APPLIED = "applied"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReloadResult:
    """What one :meth:`ConfigRef.reload` did.

    ``changed_keys`` are the dotted keys whose running value changed (hot keys only);
    ``pending_restart_keys`` are restart-only keys whose file value differs from the running one.
    """

    status: ReloadStatus
    changed_keys: tuple[str, ...] = ()
    pending_restart_keys: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: ConfigError | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigStatus:
    """The config's state for the fleet view and metrics."""

    path: Path | None
    loaded_at: datetime
    last_error_key: str | None
    last_error_reason: str | None
    pending_restart_keys: tuple[str, ...]
    reload_failures: int


_RESTART_SPECS = tuple(spec for spec in iter_keys() if spec.dotted in RESTART_KEYS)


class ConfigRef:
    """Holds the running config and swaps in valid new versions of its file."""

    def __init__(self, loaded: LoadedConfig, *, environ: Mapping[str, str], now: datetime) -> None:
        self._boot = loaded.config
        self._current = loaded.config
        self._environ = environ
        self._source = loaded.source
        self._seen: FileFingerprint | None = loaded.source
        self._applied_sha = loaded.source.sha256 if loaded.source is not None else None
        self._rejected_sha: str | None = None
        self._loaded_at = now
        self._pending: tuple[str, ...] = ()
        self._last_error: ConfigError | None = None
        self._failures = 0
        self._requested = False

    @classmethod
    def load(cls, path: Path | None, environ: Mapping[str, str], *, now: datetime) -> ConfigRef:
        """Load ``path`` with :func:`~fleetd.config.loader.load_config` and hold the result."""
        return cls(load_config(path, environ), environ=environ, now=now)

    @property
    def current(self) -> FleetdConfig:
        """The config in effect now."""
        return self._current

    def secret_values(self) -> tuple[str, ...]:
        """The secrets the running config names, for redaction only (see
        :mod:`~fleetd.config.redaction`); never log or show them."""
        return secret_values(self._current, self._environ)

    @property
    def reload_failures(self) -> int:
        """How many new file versions were rejected since start (a counter for metrics)."""
        return self._failures

    @property
    def last_reload_error(self) -> ConfigError | None:
        """Why the file on disk is not in effect, or ``None`` when it is."""
        return self._last_error

    @property
    def status(self) -> ConfigStatus:
        error = self._last_error
        return ConfigStatus(
            path=self._source.path if self._source is not None else None,
            loaded_at=self._loaded_at,
            last_error_key=error.key if error is not None else None,
            last_error_reason=error.reason if error is not None else None,
            pending_restart_keys=self._pending,
            reload_failures=self._failures,
        )

    def request_reload(self) -> None:
        """Make the next :meth:`reload` re-read and re-validate the file (for SIGHUP).

        Only sets a flag, so it is safe to call from a signal handler.
        """
        self._requested = True

    def reload(self, now: datetime) -> ReloadResult:
        """Apply the file if it changed and is valid; see the module docstring for the rule."""
        forced, self._requested = self._requested, False
        if self._source is None:
            return ReloadResult(status=ReloadStatus.UNCHANGED)
        path = self._source.path
        try:
            stat = path.stat()
        except OSError as exc:
            if self._seen is None and not forced:
                return self._unchanged()
            self._seen = None
            reason = f"cannot read: {exc.strerror or type(exc).__name__}"
            return self._reject(ConfigError(str(path), reason), sha=None)
        seen = self._seen
        if (
            not forced
            and seen is not None
            and (seen.mtime_ns, seen.size)
            == (
                stat.st_mtime_ns,
                stat.st_size,
            )
        ):
            return self._unchanged()
        try:
            data, fingerprint = read_config_bytes(path)
        except ConfigError as exc:
            # this version of the file is refused once: read again when it changes (or on SIGHUP)
            self._seen = FileFingerprint(
                path=path, mtime_ns=stat.st_mtime_ns, size=stat.st_size, sha256=""
            )
            return self._reject(exc, sha=None)
        self._seen = fingerprint
        if not forced and fingerprint.sha256 == self._applied_sha:
            self._last_error = None
            return self._unchanged()
        if not forced and fingerprint.sha256 == self._rejected_sha:
            return self._unchanged()
        try:
            loaded = parse_config_bytes(data, self._environ, path=path, fingerprint=fingerprint)
            if self._current.leads and not loaded.config.leads:
                raise ConfigError("leads", _NO_LEADS)
        except ConfigError as exc:
            return self._reject(exc, sha=fingerprint.sha256)
        return self._apply(loaded, fingerprint, now)

    def _unchanged(self) -> ReloadResult:
        return ReloadResult(status=ReloadStatus.UNCHANGED, pending_restart_keys=self._pending)

    def _reject(self, error: ConfigError, *, sha: str | None) -> ReloadResult:
        self._rejected_sha = sha
        self._last_error = error
        self._failures += 1
        _log.warning("config reload rejected, keeping the running config: %s", error)
        return ReloadResult(
            status=ReloadStatus.REJECTED, pending_restart_keys=self._pending, error=error
        )

    def _apply(
        self, loaded: LoadedConfig, fingerprint: FileFingerprint, now: datetime
    ) -> ReloadResult:
        effective = loaded.config
        pending: list[str] = []
        for spec in _RESTART_SPECS:
            running = get_value(self._boot, spec.names)
            if get_value(effective, spec.names) != running:
                pending.append(spec.dotted)
                effective = replace_value(effective, spec.names, running)
        before, after = flatten(self._current), flatten(effective)
        changed = tuple(
            sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        )
        self._current = effective
        self._applied_sha = fingerprint.sha256
        self._rejected_sha = None
        self._last_error = None
        self._pending = tuple(sorted(pending))
        self._loaded_at = now
        for warning in loaded.warnings:
            _log.warning("%s", warning)
        if self._pending:
            _log.warning("config keys need a restart to take effect: %s", ", ".join(self._pending))
        _log.info("config reloaded; changed keys: %s", ", ".join(changed) or "none")
        return ReloadResult(
            status=ReloadStatus.APPLIED,
            changed_keys=changed,
            pending_restart_keys=self._pending,
            warnings=loaded.warnings,
        )
