"""A kubeconfig user's exec credential plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`), and why it gave no
credential, said in geosched's one error line rather than lost.

The Kubernetes client runs the plugin while it builds its configuration and, when the plugin fails, only logs the
cause with `logging.error` on the root logger (kubernetes/config/kube_config.py, `_load_from_exec_plugin`) and goes
on without credentials: the server then answers 401 and the cause is a stray `ERROR:root:` line beside an error that
blames the 401. So:

- `check`: before the client runs it, a plugin named by a bare command must be on the PATH (that of the plugin's
  own env, if it sets one), else `CredentialPluginError` "credential plugin `aws` not found on PATH", with the
  entry's installHint when it has one;
- `capture` (installed once on the root logger by `geosched.kube.client`): the client's record of a failed plugin
  is kept for the thread that built the client (`failure`), so `geosched.kube.client.connect_config` raises
  `CredentialPluginError` with the plugin's exit code and the first line of its stderr. The record still goes on
  to whatever handler the process has (a daemon's log); the one-shot commands print no library lines
  (`geosched.console.logs`).

Never a credential: the plugin's stdout (where a token is) is never read here, its env values are registered with
`geosched.console.redact` by the kubeconfig reader, and only the command's name is said, never its arguments.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping
from typing import Any

from geosched.core.errors import GeoschedError

_KUBE_CONFIG = os.sep + os.path.join("kubernetes", "config") + os.sep
_RETURNED = re.compile(r"^exec: process returned (-?\d+)\.?\s*(.*)$", re.S)
_local = threading.local()


class CredentialPluginError(GeoschedError):
    """A kubeconfig user's exec plugin gave no credential (exit 1: the environment, not the input, lacks it)."""


def plugin_of(config: Mapping[str, Any], context: str | None) -> tuple[str, Mapping[str, Any]] | None:
    """The user entry (its name) and its exec block that `context` (else the current context) uses; None when it
    uses no exec plugin."""
    name = context or config.get("current-context")
    entry = next((c.get("context") or {} for c in config.get("contexts") or [] if c.get("name") == name), None)
    if not isinstance(entry, Mapping):
        return None
    user_name = entry.get("user")
    user = next((u.get("user") or {} for u in config.get("users") or [] if u.get("name") == user_name), None)
    plugin = user.get("exec") if isinstance(user, Mapping) else None
    return (str(user_name), plugin) if isinstance(plugin, Mapping) and plugin.get("command") else None


def check(config: Mapping[str, Any], context: str | None, source: str) -> None:
    """Refuse, in one line, a plugin the client could not start (see the module's docstring)."""
    found = plugin_of(config, context)
    if found is None:
        return
    user, plugin = found
    command = str(plugin["command"])
    if os.sep in command:  # a path (made absolute against its kubeconfig by geosched.kube.kubeconfig)
        if os.access(command, os.X_OK) and os.path.isfile(command):
            return
        where = "not an executable file"
    else:
        path = next((str(e.get("value")) for e in plugin.get("env") or [] if isinstance(e, Mapping)
                     and e.get("name") == "PATH"), None) or os.environ.get("PATH", os.defpath)
        if shutil.which(command, path=path) is not None:
            return
        where = "not found on PATH"
    hint = str(plugin.get("installHint") or "").strip().splitlines()
    raise CredentialPluginError(f"{source}: user {user}: credential plugin `{os.path.basename(command)}` {where}"
                                + (f" ({' '.join(hint)})" if hint else ""))


def failure_error(config: Mapping[str, Any], context: str | None, source: str) -> CredentialPluginError | None:
    """The error for a plugin that failed while this thread built a client (`capture` kept its record since
    `reset`); None when it did not, or the context uses no plugin."""
    message = failure()
    found = plugin_of(config, context)
    if message is None or found is None:
        return None
    user, plugin = found
    command = os.path.basename(str(plugin["command"]))
    returned = _RETURNED.match(message.strip())
    if returned is not None:
        lines = [line.strip() for line in returned.group(2).splitlines() if line.strip()]
        cause = f"failed (exit {returned.group(1)})" + (f": {lines[0]}" if lines else "")
    else:
        cause = f"failed: {message.strip().splitlines()[0] if message.strip() else 'no credential'}"
    return CredentialPluginError(f"{source}: user {user}: credential plugin `{command}` {cause}")


def reset() -> None:
    _local.failure = None


def failure() -> str | None:
    return getattr(_local, "failure", None)


class _Capture(logging.Filter):
    """Keeps the Kubernetes client's own log record of a failed plugin for the thread that logged it; passes every
    record on."""

    geosched_capture = True

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and _KUBE_CONFIG in (record.pathname or ""):
            _local.failure = record.getMessage()
        return True


def capture() -> None:
    """Install the filter on the root logger, where the client logs (idempotent)."""
    root = logging.getLogger()
    if not any(getattr(f, "geosched_capture", False) for f in root.filters):
        root.addFilter(_Capture())
