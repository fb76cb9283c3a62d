"""The pictures geosched draws where people look: `place --plot`, `simulate --plot` and `probe show
--heatmap`. Figures are built by pure functions; `files` turns a figure into
PNG, SVG or self-contained HTML and writes it; `write` is what the CLI calls. README.md has the map.

matplotlib is imported by the figure modules, never by this package's own import or by `files.plot_format`, so a
command checks its `--plot FILE` before it pays for matplotlib.
"""
