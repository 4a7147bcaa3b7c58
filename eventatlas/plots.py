"""Plots a run lists as artifacts (kind ``plot/...``, a ``.png`` path), made small enough to embed.

Prefect's image artifact takes a URL the browser fetches, and a ``file://`` URL is blocked from
a page served over http; its markdown renderer does accept ``data:`` image sources, so the publish
task embeds each plot, downscaled, as a base64 data URI inside a markdown artifact.
"""
from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any, Mapping

MAX_PX = 800  # longest side after downscaling
MAX_BYTES = 300_000  # PNG bytes before base64; beyond it the markdown only names the file


def is_png_plot(artifact: Mapping[str, Any]) -> bool:
    return str(artifact.get("kind") or "").startswith("plot/") and str(artifact.get("path") or "").lower().endswith(".png")


def png_data_uri(path: str | os.PathLike, max_px: int = MAX_PX, max_bytes: int = MAX_BYTES) -> str | None:
    """``data:image/png;base64,...`` of the image downscaled to ``max_px``; None when even a
    half-size copy stays over ``max_bytes``."""
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        img = im.convert("RGBA") if im.mode not in ("RGB", "RGBA", "L", "LA", "P") else im.copy()
    side = max_px
    for _ in range(3):
        small = img.copy()
        small.thumbnail((side, side))  # keeps the aspect ratio, never upscales
        buf = io.BytesIO()
        small.save(buf, format="PNG", optimize=True)
        if buf.tell() <= max_bytes:
            return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        side //= 2
    return None


def plot_markdown(path: str | os.PathLike, title: str, max_px: int = MAX_PX, max_bytes: int = MAX_BYTES) -> str:
    """Markdown showing the plot inline (when small enough) and naming its file."""
    p = Path(path)
    uri = png_data_uri(p, max_px, max_bytes)
    lines = [f"# {title}", ""]
    if uri:
        lines += [f"![{title}]({uri})", ""]
    else:
        lines += [f"(too large to embed at {max_px} px / {max_bytes} bytes)", ""]
    lines.append(f"File: `{p}`")
    return "\n".join(lines)
