"""Run one command as the scheduler's container runs it: read-only root filesystem, an emptyDir at each of the
pod's emptyDir mount paths, the ConfigMap's files at its mount path (read-only), a non-root uid, the image's
environment. Run as root in a private mount namespace (`unshare --mount`), so nothing changes outside it.

    unshare --mount python pod_sandbox.py SPEC.json

SPEC: {"empty_dirs": [path], "config_maps": {path: {file: text}}, "keep": [path], "uid": int, "gid": int,
       "read_search": bool, "setpriv": path, "workdir": path, "env": {name: value}, "argv": [arg]}.
`keep`: host paths the command needs (the Python install, the checkout); an emptyDir above one of them is bound
onto itself (writable, not empty) instead of hiding it under a fresh tmpfs.
`read_search`: keep CAP_DAC_READ_SEARCH (read and traverse, never write) for a host whose Python sits where
other users cannot read it (pyenv under /root); the image's is in /usr/local.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main(spec: dict[str, Any]) -> None:
    mount("--make-rprivate", "/")
    keep = [Path(p) for p in spec["keep"]]
    for path in spec["empty_dirs"]:
        if any(k == Path(path) or Path(path) in k.parents for k in keep):
            mount("--bind", path, path)
        else:
            mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", path)
    for path, files in spec["config_maps"].items():
        mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", path)
        for name, text in files.items():
            (Path(path) / name).write_text(text, encoding="utf-8")
        mount("-o", "remount,ro", path)
    mount("-o", "remount,bind,ro", "/")
    os.chdir(spec["workdir"])
    caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] if spec["read_search"] else []
    os.execve(spec["setpriv"], [spec["setpriv"], f"--reuid={spec['uid']}", f"--regid={spec['gid']}",
                                "--clear-groups", *caps, "--", *spec["argv"]], spec["env"])


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
