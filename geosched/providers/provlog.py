"""The provisioning log: what one `geosched provision` did, as a file a user can attach to a bug report.

Every provision (and `--resume`) writes `<home>/logs/provision-<gang>-<UTC time>.log`, every `geosched down`
`<home>/logs/down-<gang>-<UTC time>.log`: each cloud call (service,
operation, region, HTTP status, request id), each decision (zones planned and skipped, the zone tried, a capacity
or quota error, the failover to the next zone, retries), the instance ids launched and those torn down. With `-v`
the same lines go to stderr as they happen. The providers log on the standard `logging` module under
`geosched.providers`; this module only attaches the handlers for the length of one provision.

No credential reaches the file or the screen: the credentials the clouds' SDKs read (the AWS environment variables
and shared credentials file, a GCP service-account key file) are registered with geosched/console/redact.py before the
first call, and every record passes `redact.scrub` on its way out. The log names operations, never request bodies.
"""

from __future__ import annotations

import configparser
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from geosched.console import redact

LOGGER = "geosched.providers"
LOG_DIR = "logs"
FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)-7s %(name)s: %(message)s"
DATEFMT = "%Y-%m-%dT%H:%M:%S"
# Environment variables whose values are credentials whatever the cloud (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
# and any name that says it holds a secret). Not *_CREDENTIALS or *_FILE: those name files, whose paths an error
# may need to show; the files' secrets are read below.
SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PRIVATE_KEY")
AWS_FILE_KEYS = ("aws_secret_access_key", "aws_session_token", "aws_security_token")
GCP_FILE_KEYS = ("private_key", "private_key_id", "refresh_token", "client_secret")


class _Scrubbed(logging.Filter):
    """Each record with every registered credential replaced (geosched/console/redact.py), before any handler writes
    it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: logging reports that itself
            return True
        record.msg, record.args = redact.scrub(message), None
        if record.exc_info:
            record.exc_text = redact.scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def _utc_formatter() -> logging.Formatter:
    formatter = logging.Formatter(FORMAT, DATEFMT)
    formatter.converter = time.gmtime  # the times in UTC, as the file name and the cloud's own logs have them
    return formatter


def log_path(home: Path, gang: str, verb: str = "provision", now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return home / LOG_DIR / f"{verb}-{gang}-{stamp}.log"


def register_credentials(environ: Mapping[str, str]) -> None:
    """Register with redact every credential the clouds' SDKs may read from this environment."""
    redact.register(v for k, v in environ.items() if any(w in k.upper() for w in SECRET_WORDS))
    aws_file = Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or Path.home() / ".aws" / "credentials")
    redact.register(_ini_values(aws_file, AWS_FILE_KEYS))
    gcp_file = environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if gcp_file:
        redact.register(_json_values(Path(gcp_file), GCP_FILE_KEYS))


def _ini_values(path: Path, keys: tuple[str, ...]) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, configparser.Error):
        return []  # unreadable or absent: the SDK cannot read it either
    return [parser[s][k] for s in parser.sections() for k in keys if parser[s].get(k)]


def _json_values(path: Path, keys: tuple[str, ...]) -> list[str]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, ValueError):
        return []
    return [str(doc[k]) for k in keys if isinstance(doc, dict) and doc.get(k)] if isinstance(doc, dict) else []


def _private_file(path: Path) -> None:
    """Create the log owner-only (it names machines, addresses and the account's resources)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))


@contextmanager
def provision_log(home: Path, gang: str, *, verbose: bool = False, verb: str = "provision",
                  environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """For the length of the block: the providers' log records into a new file under `home` (its path yielded),
    and with `verbose` to stderr too; credentials scrubbed from both."""
    register_credentials(os.environ if environ is None else environ)
    path = log_path(home, gang, verb)
    _private_file(path)
    scrub = _Scrubbed()
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8")]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for handler in handlers:
        handler.setFormatter(_utc_formatter())
        handler.addFilter(scrub)
        handler.setLevel(logging.DEBUG)
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    for handler in handlers:
        logger.addHandler(handler)
    try:
        logger.info("geosched %s, gang %s; log %s", verb, gang, path)
        yield path
    except BaseException as exc:
        logger.error("ended by %s: %s", type(exc).__name__, exc)
        raise
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(level)
