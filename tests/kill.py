"""Running a child process that a campaign may SIGKILL: shared by the providers' and the GitOps kill campaigns."""

from __future__ import annotations

from typing import Any


def run_killable(proc: Any, kill_after_s: float | None, limit_s: float) -> bool:
    """Start `proc` (a multiprocessing Process); SIGKILL it after `kill_after_s` if it still runs, and in any
    case after `limit_s`. True if it was killed."""
    proc.start()
    killed = False
    if kill_after_s is not None:
        proc.join(kill_after_s)
        if proc.is_alive():
            proc.kill()  # SIGKILL, this child only
            killed = True
    proc.join(limit_s)
    if proc.is_alive():
        proc.kill()
        proc.join(10.0)
        killed = True
    return killed
