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

- `bound` (installed once by `geosched.kube.client`): the client's `ExecProvider.run` is replaced by `run_bounded`,
  the same protocol run with a deadline and a cap. The client reads the plugin's output whole, however long the
  plugin takes (a plugin waiting on a network or a prompt held `jobs` forever) and however much it writes (3 GB
  on stdout took 3 GB of memory). Here the plugin has `TIMEOUT_S` (60 s: client-go itself sets none; a
  real `aws eks get-token` or `gke-gcloud-auth-plugin` answers in about a second, a browser sign-in within a
  minute) and at most `STDOUT_LIMIT` (1 MiB: an ExecCredential is a token or a certificate and key, a few KiB)
  on stdout, else it is killed, with its process group, and the line says which bound it broke. Its stderr is
  kept to 64 KiB (only its first line is said). Refreshes of an expired credential go through the same run.

Never a credential: the plugin's stdout (where a token is) is never read here, its env values are registered with
`geosched.console.redact` by the kubeconfig reader, and only the command's name is said, never its arguments.
"""

from __future__ import annotations

import json
import logging
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from geosched.core.errors import GeoschedError

_KUBE_CONFIG = os.sep + os.path.join("kubernetes", "config") + os.sep
_RETURNED = re.compile(r"^exec: process returned (-?\d+)\.?\s*(.*)$", re.S)
_local = threading.local()
TIMEOUT_S = 60.0
STDOUT_LIMIT = 1 << 20
STDERR_LIMIT = 64 << 10


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
    where_ = _where(config, context, source, user)
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
    raise CredentialPluginError(f"{where_}: credential plugin `{os.path.basename(command)}` {where}"
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
        first = message.strip().splitlines()[0].removeprefix("exec: ") if message.strip() else "no credential"
        cause = f"failed: {first}"
    return CredentialPluginError(f"{_where(config, context, source, user)}: credential plugin `{command}` {cause}")


def _where(config: Mapping[str, Any], context: str | None, source: str, user: str) -> str:
    return f"{source}: context {context or config.get('current-context')}: user {user}"


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


class PluginBound(Exception):
    """The plugin broke a bound (its time, its output): said as the failure's cause."""


def run_plugin(args: Sequence[str], *, env: Mapping[str, str], cwd: str | None, shell: bool = False,
               interactive: bool = False, timeout_s: float | None = None) -> tuple[int, bytes, bytes]:
    """Run a credential plugin: its exit code, stdout and (unless `interactive`, where it goes to the terminal)
    the first `STDERR_LIMIT` bytes of its stderr. `PluginBound` when it runs past `timeout_s` (`TIMEOUT_S`) or
    writes more than `STDOUT_LIMIT` to stdout; it is killed then, with the processes it started when it does not
    share the terminal."""
    limit_s = TIMEOUT_S if timeout_s is None else timeout_s
    process = subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=sys.stderr if interactive else subprocess.PIPE,
        stdin=sys.stdin if interactive else None, cwd=cwd, env=dict(env), shell=shell,
        # its own process group, so a shell's children die with it; not when it prompts on the terminal, where a
        # background group could not read
        start_new_session=not interactive)
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + limit_s
    problem: str | None = None
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr if not interactive else None):
            if stream is not None:
                selector.register(stream, selectors.EVENT_READ)
        try:
            while problem is None and selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    problem = f"gave no credential within {limit_s:g} s"
                    break
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is process.stdout:
                        out += chunk
                        if len(out) > STDOUT_LIMIT:
                            problem = (f"wrote more than {STDOUT_LIMIT >> 20} MiB to stdout "
                                       "(an ExecCredential is a few KiB)")
                            break
                    else:  # the rest of a long stderr is read and dropped, so the plugin never blocks on it
                        err += chunk[:max(0, STDERR_LIMIT - len(err))]
            if problem is None:
                try:
                    process.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    problem = f"gave no credential within {limit_s:g} s"
        finally:
            if process.poll() is None:
                _kill(process, group=not interactive)
            process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None and stream is not sys.stderr:
                    stream.close()
    if problem is not None:
        raise PluginBound(problem)
    return process.returncode, bytes(out), bytes(err)


def _kill(process: subprocess.Popen[bytes], *, group: bool) -> None:
    try:
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except ProcessLookupError:
        pass


def run_bounded(provider: Any, previous_response: Any = None) -> Any:
    """`kubernetes.config.exec_provider.ExecProvider.run` (client 35.0), with `run_plugin` for its unbounded
    `Popen(...).communicate()`: the same ExecCredential request in KUBERNETES_EXEC_INFO, the same checks of
    the answer, the same messages (`_load_from_exec_plugin` logs them, `capture` keeps them)."""
    from kubernetes.config.config_exception import ConfigException

    interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
    info: dict[str, Any] = {"apiVersion": provider.api_version, "kind": "ExecCredential",
                            "spec": {"interactive": interactive}}
    if previous_response:
        info["spec"]["response"] = previous_response
    if provider.cluster:
        info["spec"]["cluster"] = provider.cluster.value
        for extension in provider.cluster.value.get("extensions") or []:
            if extension["name"] == "client.authentication.k8s.io/exec":
                info["spec"]["cluster"]["config"] = extension["extension"]
                break
    provider.env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    try:
        code, stdout, stderr = run_plugin(provider.args, env=provider.env, cwd=provider.cwd, shell=provider.shell,
                                          interactive=interactive)
    except PluginBound as exc:
        raise ConfigException(f"exec: {exc}") from None
    except OSError as exc:  # it could not be started (check() looked first; it may have changed since)
        raise ConfigException(f"exec: cannot start: {exc.strerror or exc}") from None
    if code != 0:
        message = f"exec: process returned {code}"
        text = stderr.decode("utf-8", "replace").strip()
        raise ConfigException(f"{message}. {text}" if text else message)
    try:
        data = json.loads(stdout)
    except ValueError as exc:  # the decoder's message names a position, never the text (the token)
        raise ConfigException(f"exec: failed to decode process output: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigException("exec: malformed response: not an ExecCredential object")
    for key in ("apiVersion", "kind", "status"):
        if key not in data:
            raise ConfigException(f"exec: malformed response. missing key '{key}'")
    if data["apiVersion"] != provider.api_version:
        raise ConfigException("exec: plugin api version does not match the kubeconfig's")
    return data["status"]


def bound() -> None:
    """Replace the client's plugin runner with `run_bounded` (idempotent; every ExecProvider, the refreshes'
    too, goes through the class)."""
    from kubernetes.config import exec_provider

    if getattr(exec_provider.ExecProvider.run, "geosched_bounded", False):
        return

    def run(self: Any, previous_response: Any = None) -> Any:
        return run_bounded(self, previous_response)

    run.geosched_bounded = True  # type: ignore[attr-defined]
    exec_provider.ExecProvider.run = run  # type: ignore[method-assign]
