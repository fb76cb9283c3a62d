"""Logging at the CLI edge. A one-shot command's stderr holds geosched's own lines and nothing a library logs: the
Kubernetes client logs a failed exec plugin with `logging.error` on the root logger (which, with no handler there,
configures one on the spot and so lets every later library warning through, urllib3's `Retrying ...` among them);
geosched says the cause in its one error line instead (`geosched.kube.credplugin`). The long-running verbs (the
in-cluster scheduler, the MultiKueue dispatcher) log with timestamps, libraries included (urllib3's retry warnings
excepted): `daemon`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Stderr(logging.Handler):
    """What Python's last-resort handler does for geosched's own warnings (the message alone, on the stderr of the
    moment, WARNING and up), with library records left out."""

    geosched_edge = True

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.addFilter(_own)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # a log line must never fail the command
            self.handleError(record)


def _own(record: logging.LogRecord) -> bool:
    """geosched's records that no logger below the root handles: as the last-resort handler it stands in for, a
    package that routes its records elsewhere keeps them there (`geosched.providers` has a NullHandler, its lines
    go to the provisioning log, and its error says the cause in one line)."""
    if not (record.name == "geosched" or record.name.startswith("geosched.")):
        return False
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None and logger is not logging.getLogger():
        if logger.handlers:
            return False
        logger = logger.parent if logger.propagate else None
    return True


class _Escaping(logging.Formatter):
    """The daemons' lines, each message escaped as error lines are (`geosched.core.errors.escape`): a context,
    cluster or workload name carrying ESC or BEL (or a line break, which would forge a log line of its own) is
    shown as `\\x1b`, never sent raw to a terminal (attack report 2026-12-07, finding 7). A traceback keeps its
    line breaks; its control characters are escaped line by line."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        from geosched.core.errors import escape

        message = record.message
        record.message = escape(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei: Any) -> str:
        from geosched.core.errors import escape

        return "\n".join(escape(line) for line in super().formatException(ei).split("\n"))


def _not_a_plugin_stderr(record: logging.LogRecord) -> bool:
    """The Kubernetes client logs a failed exec credential plugin on the root logger with the plugin's stderr
    (`logging.error(str(e))` in kubernetes/config/kube_config.py, the message made in exec_provider.py as `exec:
    process returned 1. <stderr>`): raw, over several lines, and possibly a secret. geosched says the failure in
    its own line (geosched.kube.credplugin); the client's root-logger records of kubernetes.config (all three
    are about the plugin) are dropped (attack report 2026-12-07, finding 6)."""
    return not (
        record.name == "root"
        and record.module in _CLIENT_CONFIG_MODULES
        and "kubernetes" in Path(record.pathname).parts
    )


_CLIENT_CONFIG_MODULES = frozenset({"kube_config", "exec_provider"})


def one_shot() -> None:
    """geosched's warnings as lines, no library's log lines (idempotent)."""
    root = logging.getLogger()
    if not any(getattr(h, "geosched_edge", False) for h in root.handlers):
        root.addHandler(_Stderr())


def daemon(verbose: bool) -> None:
    """Timestamped lines for every logger at INFO, geosched's own at DEBUG with `verbose`; replaces `one_shot`
    (only its handler: a handler someone else put on the root logger stays, and then basicConfig adds none)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "geosched_edge", False)]:
        root.removeHandler(handler)
    before = set(root.handlers)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=FORMAT)
    for handler in root.handlers:
        if handler not in before:  # basicConfig's own: someone else's handler keeps its format
            handler.setFormatter(_Escaping(FORMAT))
    # On the root logger itself: the client logs there directly (logging.error), so the record meets this filter
    # before any handler, someone else's included.
    if _not_a_plugin_stderr not in root.filters:
        root.addFilter(_not_a_plugin_stderr)
    # Only geosched's own lines go to debug: the HTTP libraries' debug output includes response bodies.
    logging.getLogger("geosched").setLevel(logging.DEBUG if verbose else logging.INFO)
    # urllib3 says each of its own retries (`Retrying (Retry(total=2, ...)) after connection broken by ...`), three
    # per failed request, per resource, for as long as a server is down; geosched says the cause itself, once per
    # backoff step (geosched.kube.scheduler.reflector.Outage) or in the command's one error line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
