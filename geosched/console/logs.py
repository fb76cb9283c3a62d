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
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=FORMAT)
    # Only geosched's own lines go to debug: the HTTP libraries' debug output includes response bodies.
    logging.getLogger("geosched").setLevel(logging.DEBUG if verbose else logging.INFO)
    # urllib3 says each of its own retries (`Retrying (Retry(total=2, ...)) after connection broken by ...`), three
    # per failed request, per resource, for as long as a server is down; geosched says the cause itself, once per
    # backoff step (geosched.kube.scheduler.reflector.Outage) or in the command's one error line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
