"""`geosched config show | path`: every setting (geosched/settings/__init__.py), its value and where it came from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from geosched.console.output import NoHeadersOpt, Output, OutputOpt

if TYPE_CHECKING:
    from geosched import settings
    from geosched.files.decl.settings import SettingRow

app = typer.Typer(no_args_is_help=True, help="The settings: where the config file is, and every value in force.")


@app.command("path")
def path_cmd() -> None:
    """Print where the config file is read from ($GEOSCHED_CONFIG, else the user config directory)."""
    from geosched import settings
    from geosched.console import render
    render.out.print(str(settings.config_path()), markup=False, soft_wrap=True)


@app.command("show")
def show_cmd(ctx: typer.Context, output: OutputOpt = Output.TABLE, no_headers: NoHeadersOpt = False) -> None:
    """Every setting, its value and where it came from: flag, env, file or default."""
    from geosched import settings
    from geosched.console import render
    from geosched.console.output import emit_document
    from geosched.files.decl.settings import SettingsDoc
    rows = [_row(ctx, s) for s in settings.SETTINGS]
    emit_document(SettingsDoc.build(config_file=str(settings.config_path()), settings=rows), output, lambda: (
        render.table(f"settings (config file: {settings.config_path()})",
                     [{"key": r.key, "variable": r.variable, "value": _text(r.value, s), "source": r.source}
                      for r, s in zip(rows, settings.SETTINGS, strict=True)])),
        no_headers=no_headers)


def _row(ctx: typer.Context, setting: settings.Setting) -> SettingRow:
    from geosched import settings
    from geosched.console import redact
    from geosched.files.decl.settings import SettingRow
    from geosched.store.db import default_home
    value, source = settings.resolve(setting)
    flag = _flag(ctx, setting)
    if flag is not None:
        value, source = flag, "flag"
    if setting is settings.HOME and value is None:
        value = default_home()
    plain = list(value) if isinstance(value, tuple) else str(value) if isinstance(value, Path) else value
    if isinstance(plain, str) and "://" in plain:
        # An endpoint may carry credentials (https://user:pass@host, ?access_token=...): never printed (attack
        # report 2026-12-07, finding 11).
        plain = redact.url(plain)
    return SettingRow.build(key=setting.key, variable=setting.env, value=plain, source=source)


def _flag(ctx: typer.Context, setting: settings.Setting) -> Any:
    """The value of this invocation's own option for the setting (`--home`, `-o`), when given on the command line."""
    level: Any = ctx
    while level is not None and setting.option is not None:
        source = level.get_parameter_source(setting.option)
        if source is not None and source.name == "COMMANDLINE":
            value = level.params[setting.option]
            return getattr(value, "value", value)
        level = level.parent
    return None


def _text(value: Any, setting: settings.Setting) -> str:
    if value is None:
        return f"({setting.shown_default})" if setting.shown_default else "-"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)
