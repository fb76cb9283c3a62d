"""The installed version, on its own so that the entry point (`geosched --version`, answered before the CLI is
imported) and the CLI's `--version` read one function without importing each other."""

from __future__ import annotations


def installed_version() -> str:
    """The version of the installed distribution (its metadata), so a wheel and a checkout say the same."""
    from importlib import metadata  # here: it loads the email package, which only --version needs

    try:
        return metadata.version("geosched")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
