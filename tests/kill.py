"""Running a child process that a campaign may SIGKILL: shared by the providers' and the GitOps kill campaigns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_killable(proc: Any, kill_after_s: float | None, limit_s: float,
                 before_kill: Callable[[int], None] | None = None) -> bool:
    """Start `proc` (a multiprocessing Process); SIGKILL it after `kill_after_s` if it still runs, and in any
    case after `limit_s`. True if it was killed. `before_kill(pid)` runs just before each SIGKILL (to read
    what only the living process can tell, such as its peak memory)."""
    proc.start()
    killed = False

    def kill() -> None:
        if before_kill is not None:
            before_kill(proc.pid)
        proc.kill()  # SIGKILL, this child only

    if kill_after_s is not None:
        proc.join(kill_after_s)
        if proc.is_alive():
            kill()
            killed = True
    proc.join(limit_s)
    if proc.is_alive():
        kill()
        proc.join(10.0)
        killed = True
    return killed


def peak_rss_kib(pid: int | str = "self") -> int:
    """The process's peak resident set (VmHWM in /proc/PID/status, KiB); 0 when it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0
