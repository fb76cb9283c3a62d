"""The `geosched` command's entry point (the console script and `python -m geosched`).

`geosched --version` alone is answered here, before the CLI is imported: typer, click, rich and the declarations of
every verb cost several times what printing a version needs (issue 25 item 7: under 0.3 s). Every other command
line, `--version` among other arguments included, goes to `geosched.cli.main.main`, which prints the same line.
"""

from __future__ import annotations

import sys

VERSION_FLAGS = (["--version"], ["-V"])


def installed_version() -> str:
    """The version of the installed distribution (its metadata), so a wheel and a checkout say the same."""
    from importlib import metadata  # here: it loads the email package, which only --version needs

    try:
        return metadata.version("geosched")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def main() -> None:
    if sys.argv[1:] in VERSION_FLAGS:
        sys.stdout.write(f"geosched {installed_version()}\n")
        sys.exit(0)
    from geosched.cli.main import main as cli_main

    cli_main()
