"""Reading the pictures geosched writes, for tests that check what they show: SVG text and element ids (the
figures give the artists that matter a `gid`), PNG size and whether anything is drawn."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from PIL import Image

SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_root(data: bytes | str) -> ET.Element:
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return ET.fromstring(text[text.index("<svg"):text.rindex("</svg>") + len("</svg>")])


def svg_texts(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(f"{SVG_NS}text")]


def svg_ids(root: ET.Element, pattern: str) -> list[str]:
    wanted = re.compile(pattern)
    return [i for e in root.iter() if (i := e.get("id")) and wanted.fullmatch(i)]


def png_summary(path: Path) -> tuple[tuple[int, int], int, Counter[tuple[int, ...]]]:
    """(width, height), the number of distinct colours, and the colours' pixel counts."""
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        counted = rgb.getcolors(maxcolors=rgb.width * rgb.height) or []
        colours = Counter({tuple(colour): count for count, colour in counted})
        return rgb.size, len(colours), colours


def near(colour: tuple[int, ...], target: tuple[int, int, int], tolerance: int = 12) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour, target, strict=False))
