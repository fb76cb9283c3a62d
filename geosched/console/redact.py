"""Credentials never reach an output: the last line of defence, applied at every edge that prints.

A module that reads a credential (a kubeconfig's token, password, key or CA data, an exec plugin's env) calls
`register` with the values before anything can fail on them; every error line (`render.error`), console
line and table (`render._Console`), document (`render.data`, JSON/YAML/CSV), log record (`scrub_logging`,
as each record is made) and Python warning passes `scrub`, which replaces each registered value with
`<redacted>`. The modules that read credentials also keep values out of their own messages (they name fields,
never values); this catches what a library says (the Kubernetes client quotes whole entries).

Values shorter than `SHORTEST` are not registered: scrubbing a short common string would mangle ordinary
output, and such a value is not a credential worth the name (tokens, keys and CA data are long).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

SHORTEST = 8
MARK = "<redacted>"
_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def register(values: Iterable[str]) -> None:
    global _secrets
    new = {v for v in values if len(v) >= SHORTEST}
    if new - _secrets:
        with _lock:
            _secrets = _secrets | new


def scrub(text: str) -> str:
    """`text` with every registered credential replaced (longest first: one may contain another)."""
    secrets = _secrets
    if not secrets:
        return text
    for secret in sorted((s for s in secrets if s in text), key=len, reverse=True):
        text = text.replace(secret, MARK)
    return text


def _scrub_record(record: logging.LogRecord) -> None:
    if not _secrets:
        return
    try:
        record.msg, record.args = scrub(record.getMessage()), None
    except Exception:  # a record whose arguments do not fit its format: the handler reports that itself
        return
    if record.exc_info:
        record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        record.exc_info = None


def scrub_logging() -> None:
    """Scrub every log record as it is made, whichever logger and handler carry it: a library may log on the
    root logger before any handler exists (the Kubernetes client logs a failed exec plugin's stderr with
    `logging.error`, which configures a handler on the spot). Idempotent."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "geosched_scrubs", False):
        return

    def scrubbed(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        _scrub_record(record)
        return record

    scrubbed.geosched_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(scrubbed)


def url(text: str) -> str:
    """A URL with its credentials replaced: the userinfo (`user:password@`, or a token alone as the user) and every
    query value (`?access_token=...`), as Go's url.URL.Redacted (kubectl, helm) hides the password; here the user
    too, since a token is often put there. Host, port and path stay: they are what a reader checks. Text that is
    not a URL with a scheme and host is returned as it is."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(text)
    except ValueError:  # an unparseable URL (a bad IPv6 literal) may still hold a credential: hide all of it
        return MARK
    if not parts.scheme or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MARK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MARK) for k, _ in pairs], safe="<>") if pairs else MARK
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
