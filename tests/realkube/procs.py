"""The control plane's processes: started so that none outlives the test session, however it ends.

- A clean end (tests done, a failure, Ctrl-C, SIGTERM turned into KeyboardInterrupt by the fixture): `stop()`
  sends SIGTERM to the process group, then SIGKILL after a grace period, and waits, so no port stays bound.
- pytest killed outright (SIGKILL, the OOM killer): every process is started under `setpriv --pdeathsig KILL`,
  so the kernel kills it when the pytest process dies; its temporary directory (named with the pytest pid) is
  removed by the next session (`sweep_stale`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing, suppress
from pathlib import Path

TMP_PREFIX = "geosched-realkube-"


class StartError(RuntimeError):
    pass


def free_port() -> int:
    """A loopback port nothing listens on now. Another process may take it before ours binds: the caller starts
    the server and retries with a new port if it exits at once (see Proc.wait_ready)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_dir() -> Path:
    sweep_stale()
    return Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))


def sweep_stale() -> None:
    """Remove the temporary directories of sessions whose pytest process is gone (killed before its teardown)."""
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*"):
        try:
            pid = int(path.name[len(TMP_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)


def _setpriv() -> list[str]:
    found = shutil.which("setpriv")
    return [found, "--pdeathsig", "KILL", "--"] if found else []


class Proc:
    def __init__(self, name: str, argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._log_file = log.open("ab")
        self.popen = subprocess.Popen(
            [*_setpriv(), *self.argv], stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float, every_s: float = 0.1) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.alive():
                raise StartError(f"{self.name} exited with {self.popen.returncode}:\n{self.tail()}")
            try:
                if ready():
                    return
            except Exception:  # not serving yet: connection refused, TLS not up, 5xx
                pass
            if time.monotonic() > deadline:
                raise StartError(f"{self.name} not ready after {timeout_s:.0f} s:\n{self.tail()}")
            time.sleep(every_s)  # real sleep: polling a real control-plane process until it serves

    def stop(self, grace_s: float = 10.0) -> None:
        if self.alive():
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self._log_file.close()

