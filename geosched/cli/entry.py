"""The `geosched` command's entry point (the console script and `python -m geosched`).

`geosched --version` alone is answered here, before the CLI is imported: typer, click, rich and the declarations of
every verb cost several times what printing a version needs (issue 25 item 7: under 0.3 s). Every other command
line, `--version` among other arguments included, goes to `geosched.cli.main.main`, which prints the same line.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import TYPE_CHECKING

from geosched.cli.version import installed_version

if TYPE_CHECKING:
    from typing_extensions import Buffer

VERSION_FLAGS = (["--version"], ["-V"])


class OutputFailed(OSError):
    """Writing the command's standard output failed (a full disk, a closed pipe, an I/O error): an environment
    failure, told in one line at the entry point rather than as a traceback out of whichever renderer was writing
    (attack report 2026-12-07, finding 2). An OSError still, so code that handles OSError sees no change."""


class _GuardedStdout(io.FileIO):
    """File descriptor 1, its write failures marked as OutputFailed: only those are the output's, whereas an
    OSError from reading an input or a socket keeps its own meaning (and handler)."""

    def write(self, b: Buffer, /) -> int:
        try:
            return super().write(b)
        except OSError as exc:
            raise OutputFailed(exc.errno, exc.strerror) from exc


def guard_stdout() -> None:
    """Route sys.stdout through _GuardedStdout, with the same encoding and buffering; only the interpreter's own
    stream on fd 1 (a test's captured stdout is left alone)."""
    current = sys.stdout
    if current is None or current is not sys.__stdout__ or not isinstance(current, io.TextIOWrapper):
        return
    try:
        if current.fileno() != 1:
            return
    except (OSError, ValueError):
        return
    current.flush()
    raw = _GuardedStdout(1, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=current.encoding,
        errors=current.errors,
        line_buffering=current.line_buffering,
    )


def output_failed(exc: OSError) -> None:
    """The end of a command whose output could not be written: one line on stderr (none for a closed pipe, as
    `cmd | head` is normal use), exit 1, or 141 (128 + SIGPIPE, what a shell reports for a C tool) for the pipe."""
    # Whatever is still buffered would fail again in the interpreter's last flush ("Exception ignored ...
    # BrokenPipeError"): fd 1 goes to /dev/null first, so that flush succeeds and prints nothing.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    if exc.errno == errno.EPIPE:
        sys.exit(128 + 13)
    reason = exc.strerror or os.strerror(exc.errno or errno.EIO)
    try:
        sys.stderr.write(f"error: cannot write the output: {reason}\n")
        sys.stderr.flush()
    except OSError:  # stderr is gone too: the exit code is all that is left
        pass
    sys.exit(1)


def main() -> None:
    guard_stdout()
    try:
        if sys.argv[1:] in VERSION_FLAGS:
            sys.stdout.write(f"geosched {installed_version()}\n")
        else:
            from geosched.cli.main import main as cli_main

            cli_main()
    except SystemExit:
        _flush()  # the output's last bytes: a failure here is the output's, not the interpreter's at exit
        raise
    except OutputFailed as exc:
        output_failed(exc)
    _flush()
    sys.exit(0)


def _flush() -> None:
    try:
        sys.stdout.flush()
    except OutputFailed as exc:
        output_failed(exc)
