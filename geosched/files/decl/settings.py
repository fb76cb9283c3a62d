"""Settings: what `geosched config show -o json|yaml` prints (every setting, its value and where it came from). The
settings themselves are declared in geosched.settings.model; this is the printed document's shape."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from geosched.files.decl.base import Declared, OutputDocument


class SettingRow(Declared):
    key: str
    variable: str
    value: Any  # the setting's own type: text, a number, a list of names, a flag, or null (not set)
    source: Literal["flag", "env", "file", "default"]


class SettingsDoc(OutputDocument):
    KIND: ClassVar[str] = "Settings"
    DESCRIPTION: ClassVar[str] = "`geosched config show -o json|yaml`: every setting, its value and where it came from."

    config_file: str
    settings: list[SettingRow]
