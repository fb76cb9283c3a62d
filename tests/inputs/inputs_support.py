"""Running the `geosched` command on hostile inputs: as a real process (the entry point users run) and
in-process (the same `main`, a hundred times faster, for the fuzz suite), both reporting the exit code, the
output and whether a traceback escaped."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import typer.main

_get_command = typer.main.get_command
ROOT = Path(__file__).resolve().parents[2]
# Enough for any command on the small inputs of these tests; a YAML bomb needs gigabytes.
MEMORY_LIMIT = 1 << 30


@dataclass(frozen=True)
class Run:
    code: int | str
    """The exit code, or "traceback" when an exception escaped `main`."""
    stdout: str
    stderr: str

    @property
    def one_line_error(self) -> bool:
        lines = self.stderr.rstrip("\n").split("\n")
        return self.code == 2 and len(lines) == 1 and lines[0].startswith("error: ")

    @property
    def traceback(self) -> bool:
        return self.code == "traceback" or "Traceback (most recent call last)" in self.stderr


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def geosched(*args: str | Path, home: Path, timeout: float = 60, env: dict[str, str] | None = None) -> Run:
    """`python -m geosched ARGS` with 1 GiB of address space at most."""
    full_env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200", **(env or {})}
    done = subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT, preexec_fn=_limit_memory)
    return Run(done.returncode, done.stdout, done.stderr)


_COMMANDS: dict[int, tuple[Any, Any]] = {}


def _cached_command(app: Any) -> Any:
    # typer rebuilds the click command tree from the signatures on every call (~0.3 s); a process runs it once.
    # Keyed by the app object, kept alive here: the CLI hands typer a copy of its app holding only the verb run
    # (cli.main.verb_only), and a freed copy's id is reused by the next one, which then got the other verb's tree
    # ("No such command 'report'" once in a full run).
    cached = _COMMANDS.get(id(app))
    if cached is None or cached[0] is not app:
        cached = _COMMANDS[id(app)] = (app, _get_command(app))
    return cached[1]


def in_process(args: Sequence[str | Path], home: Path, env: dict[str, str] | None = None) -> Run:
    """`geosched.cli.main.main` with these arguments (and environment variables) in this process: what `python -m
    geosched` runs, minus the interpreter start and typer's building of the command tree (done once)."""
    from geosched.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str = 0
    argv = ["geosched", "--home", str(home), *map(str, args)]
    with (mock.patch.object(sys, "argv", argv), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
          mock.patch.dict(os.environ, {"COLUMNS": "200", **(env or {})}),
          mock.patch.object(typer.main, "get_command", _cached_command)):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # exactly what the suite looks for
            code = "traceback"
            err.write(traceback.format_exc())
    return Run(code, out.getvalue(), err.getvalue())
