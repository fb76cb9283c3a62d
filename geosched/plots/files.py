"""A matplotlib Figure as a PNG, SVG or self-contained HTML file: the one place every `--plot` / `--heatmap`
turns a figure into bytes and writes them (through `geosched.files.writes`, so a reader never sees half a file).

- The format comes from the file's suffix (`plot_format`), checked before any work is done; anything else is
  bad input (one line, exit 2).
- SVG keeps its text as `<text>` elements (`svg.fonttype: none`), so labels stay searchable, selectable and
  testable; artists given a `gid` keep it as the element's `id`.
- HTML is one file with the SVG inline: no script, no external resource, and a Content-Security-Policy that
  forbids fetching anything (as the HTML report). Every name is escaped: matplotlib escapes the SVG's text,
  `html.escape` the page's own title and notes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from geosched.core.errors import InputError
from geosched.files.writes import write_file

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("png", "svg", "html")
DPI = 110
CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = ("body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px; color: #222; "
         "padding: 0 1rem; } svg { max-width: 100%; height: auto; } .note { color: #555; }")


def plot_format(path: Path, option: str) -> str:
    """png, svg or html from the file's suffix; bad input naming `option` otherwise."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix == "htm":
        suffix = "html"
    if suffix not in FORMATS:
        raise InputError(option, "", f"{path}: expected a .png, .svg or .html file, got "
                         f"{'no suffix' if not suffix else repr('.' + suffix)}")
    return suffix


def plain(text: object) -> str:
    """A name or label as matplotlib shows it literally: `$` would otherwise start mathtext."""
    return str(text).replace("$", r"\$")


def figure_bytes(fig: Figure, fmt: str, title: str = "", notes: Sequence[str] = ()) -> bytes:
    """The figure in `fmt` (one of FORMATS). Pure: nothing is written."""
    # Imported here: matplotlib costs half a second, and the CLI checks `plot_format` before it needs it.
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # a bare Figure on the Agg canvas: no pyplot state, no display
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "geosched"}):
        fig.savefig(buf, format="png" if fmt == "png" else "svg", dpi=DPI)
    if fmt != "html":
        return buf.getvalue()
    return html_page(title, inline_svg(buf.getvalue().decode("utf-8")), notes).encode("utf-8")


def inline_svg(document: str) -> str:
    """The `<svg>` element of an SVG document, without its XML declaration and DOCTYPE (not allowed inline)."""
    start = document.find("<svg")
    if start < 0:
        raise ValueError("not an SVG document")
    return document[start:]


def html_page(title: str, svg: str, notes: Sequence[str] = ()) -> str:
    listed = "".join(f'<li class="note">{escape(n)}</li>' for n in notes)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"/>\n<title>{escape(title)}</title>\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n<h1>{escape(title)}</h1>\n{svg}\n"
            + (f"<ul>{listed}</ul>\n" if listed else "") + "</body>\n</html>\n")


def write_figure(path: Path, fig: Figure, option: str, title: str = "", notes: Sequence[str] = ()) -> Path:
    """Render and write `fig` whole to `path` in the format its suffix names."""
    write_file(path, figure_bytes(fig, plot_format(path, option), title, notes))
    return path
