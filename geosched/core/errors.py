"""Errors the edges map to exit codes (docs/exit-codes.md): 0 done, 1 failed (a provider or cluster could not be
read or changed), 2 bad input, 3 no fit, 4 no credentials."""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NO_FIT = 3
EXIT_NO_CREDENTIALS = 4


class GeoschedError(Exception):
    exit_code = EXIT_FAILED


class InputError(GeoschedError):
    """Bad input, reported as one line: where (file and field path) and why."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, field: str, reason: str) -> None:
        self.source = source
        self.field = field
        self.reason = reason
        where = f"{source}: {field}" if field else source
        super().__init__(one_line(f"{where}: {reason}"))


class OutputError(GeoschedError):
    """A file or directory could not be written (a read-only or full file system, no permission, a directory
    where a file goes, a name too long): one line naming the path and the cause, exit 1. What the path held
    before is left whole (geosched.files.writes)."""

    def __init__(self, path: str, cause: str) -> None:
        self.path = path
        self.cause = cause
        super().__init__(one_line(f"{path}: cannot write: {cause}"))


class MissingExtra(GeoschedError):
    """An optional dependency is not installed: one line naming the extra that brings it, exit 1 (the install, not
    the input, lacks something; geosched.core.extras says which module comes with which extra)."""

    exit_code = EXIT_FAILED

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(f"{module} is not installed; it comes with the {extra!r} extra: "
                         f"pip install 'geosched[{extra}]'")


class CredentialsError(GeoschedError):
    """No usable credentials for any provider a command needs: said before any prompt or API call."""

    exit_code = EXIT_NO_CREDENTIALS

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


MAX_MESSAGE = 1000


def one_line(text: str) -> str:
    """Field names and values come from the input: escape what would break the one-line promise, and keep the
    line readable when a quoted value is huge."""
    line = escape(text)
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + "..."


def escape(text: str) -> str:
    """`text` with every character that is not printable (ESC, BEL, line breaks, ...) written as its Python escape
    (`\\x1b`, `\\n`): a name from a file or a cluster can neither drive the terminal nor start a line of its own.
    The one escaping of names for error lines and the daemons' log lines alike."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
