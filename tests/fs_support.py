"""File systems that fail, for real: a small tmpfs (full, or read-only) mounted in a private mount namespace of
its own (`unshare -m`: the mount is gone with the process, whatever happens, and nothing else on the machine
sees it), the file size limit (RLIMIT_FSIZE: EFBIG), and root without its override of file permissions
(setpriv drops CAP_DAC_OVERRIDE: EACCES on a 0555 directory). The command under test is `python -m geosched`
as users run it; the namespace's driver reports its exit code, its output and what the tmpfs holds afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
import hashlib, json, os, shutil, subprocess, sys
plan = json.loads(sys.argv[1])
mnt = plan["mount"]
os.makedirs(mnt, exist_ok=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700" % plan["size"], "tmpfs", mnt], check=True)
shutil.copytree(plan["seed"], mnt, symlinks=True, dirs_exist_ok=True)
if plan["room"] is not None:  # the seed's pages and `room` bytes more: a write further on fails with ENOSPC
    st = os.statvfs(mnt)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    subprocess.run(["mount", "-o", "remount,size=%d" % (used + plan["room"]), mnt], check=True)
fill = os.path.join(mnt, ".fill")
if plan["full"]:
    fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)
    try:  # every free block, so the next write fails with ENOSPC
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    os.close(fd)
if plan["read_only"]:
    subprocess.run(["mount", "-o", "remount,ro", mnt], check=True)
run = subprocess.run(plan["argv"], capture_output=True, text=True, env=plan["env"], cwd=plan["cwd"])
if plan["read_only"]:
    subprocess.run(["mount", "-o", "remount,rw", mnt], check=True)
if plan["full"]:
    os.unlink(fill)
if plan["room"] is not None:
    subprocess.run(["mount", "-o", "remount,size=%d" % plan["size"], mnt], check=True)
after = [subprocess.run(argv, capture_output=True, text=True, env=plan["env"], cwd=plan["cwd"]).returncode
         for argv in plan["after"]]
listing = {}
for here, dirs, files in os.walk(mnt):
    for name in dirs + files:
        path = os.path.join(here, name)
        rel = os.path.relpath(path, mnt)
        listing[rel] = "dir" if os.path.isdir(path) else hashlib.sha256(open(path, "rb").read()).hexdigest()
print(json.dumps({"code": run.returncode, "stdout": run.stdout, "stderr": run.stderr, "after": after,
                  "listing": listing}))
"""


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    listing: dict[str, str]
    """Every entry of the tmpfs after the command (and the fill file gone): relative path -> sha256 or "dir"."""
    after: list[int]
    """Exit codes of the commands run after it, with the disk writable and free again."""

    @property
    def one_line(self) -> bool:
        lines = self.stderr.rstrip("\n").split("\n")
        return len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in self.stderr


def listing(root: Path) -> dict[str, str]:
    """What `DRIVER` reports, for a directory on an ordinary file system."""
    out = {}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            out[str(path.relative_to(root))] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(not can_mount(), reason="needs root and unshare -m (CI runs as root)")


def geosched_argv(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "geosched", *map(str, args)]


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200", "PYTHONPATH": str(ROOT)}


def on_tmpfs(mount: Path, seed: Path, argv: Sequence[str], home: Path, *, size: int = 16 << 20, full: bool = False,
             room: int | None = None, read_only: bool = False, after: Sequence[Sequence[str]] = ()) -> Outcome:
    """Mount a tmpfs of `size` bytes at `mount` (in a mount namespace of the command's own), copy `seed` into it,
    shrink it to what the seed takes and `room` bytes more (tmpfs counts whole pages) or make it full or
    read-only, run `argv`, then `after` with the disk writable and free again."""
    plan = {"mount": str(mount), "size": size, "seed": str(seed), "full": full, "room": room, "read_only": read_only,
            "argv": list(argv), "env": env(home), "cwd": str(ROOT), "after": [list(a) for a in after]}
    done = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c", DRIVER,
                           json.dumps(plan)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    return Outcome(report["code"], report["stdout"], report["stderr"], report["listing"], report["after"])


def run(argv: Sequence[str], home: Path, *, file_size: int | None = None,
        without_dac_override: bool = False) -> Outcome:
    """`argv` as a process, with RLIMIT_FSIZE at `file_size` bytes, or as root that file modes bind."""
    def limit() -> None:
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    prefix = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
              "--bounding-set=-dac_override,-dac_read_search"] if without_dac_override else []
    done = subprocess.run([*prefix, *argv], capture_output=True, text=True, env=env(home), cwd=ROOT, timeout=300,
                          preexec_fn=limit)
    return Outcome(done.returncode, done.stdout, done.stderr, {}, [])
