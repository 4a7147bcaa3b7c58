"""Plots a run lists as artifacts (kind ``plot/...``, a ``.png`` path): drawing them and embedding them.

``projection_png`` (a 2-D UMAP / t-SNE / PCA projection of embeddings coloured by gold type, and by
induced cluster) and ``metric_bars_png`` (a run's headline metrics per configuration) write the PNGs;
the runner attaches the metric bars to every completed run (``plot/metric_bars``), the untuned
method its projection (``plot/projection/<representation>``), batch attention its own
(``plot/umap/<representation>``).

Prefect's image artifact takes a URL the browser fetches, and a ``file://`` URL is blocked from
a page served over http; its markdown renderer does accept ``data:`` image sources, so the publish
task embeds each plot, downscaled, as a base64 data URI inside a markdown artifact.
"""
from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

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


# ----------------------------------------------------------------------------- run plots (PNG artifacts)
PROJECTIONS = ("umap", "tsne", "pca")
MAX_PROJECTED = 5000  # points drawn in a projection; above it a seeded subsample (recorded in the title)
# `auto` below this many points is PCA: umap-learn's first call in a process compiles its numba
# kernels (measured ~30 s on one core), which would dominate a run on a shipped sample
AUTO_MIN_NONLINEAR = 300


def pyplot():
    """matplotlib's pyplot on the headless Agg backend (every run plot goes through here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | os.PathLike) -> Path:
    """Write ``fig`` as a PNG atomically (temp + rename) and close it."""
    from ..io import atomic_path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    pyplot().close(fig)
    return path


def _tab20(i):
    """tab20 index of class ``i``: the ten strong colours first, then their light pairs."""
    return (2 * i) % 20 + (i // 10) % 2


def project_2d(X, *, method: str = "auto", seed: int = 0):
    """``(N, 2)`` coordinates of the rows of ``X`` by cosine geometry, and the method used.

    ``auto`` = UMAP (``umap-learn``, a dependency) when it imports, else t-SNE from scikit-learn, and
    PCA below ``AUTO_MIN_NONLINEAR`` points; ``pca`` is scikit-learn's PCA of the unit vectors (cheap,
    linear). Fewer than 5 points: always PCA."""
    import numpy as np

    X = np.asarray(X, dtype=np.float32)
    if method not in ("auto", *PROJECTIONS):
        raise ValueError(f"unknown projection {method!r}; expected auto or one of {PROJECTIONS}")
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    U = X / np.where(norms > 0, norms, 1.0)
    if len(U) < 5 or method == "pca" or (method == "auto" and len(U) < AUTO_MIN_NONLINEAR):
        from sklearn.decomposition import PCA

        k = min(2, *U.shape)
        xy = PCA(n_components=k, random_state=seed).fit_transform(U) if k else np.zeros((len(U), 0))
        return np.pad(xy, ((0, 0), (0, 2 - xy.shape[1]))), "pca"
    if method in ("auto", "umap"):
        try:
            import umap
        except ImportError:
            if method == "umap":
                raise
        else:
            nn = min(15, len(U) - 1)
            return umap.UMAP(n_components=2, n_neighbors=nn, metric="cosine", random_state=seed,
                             n_jobs=1).fit_transform(U), "umap"
    from sklearn.manifold import TSNE

    perplexity = float(min(30.0, max(2.0, (len(U) - 1) / 3)))
    return TSNE(n_components=2, metric="cosine", perplexity=perplexity, init="pca", random_state=seed).fit_transform(U), \
        "tsne"


def projection_png(X, gold: Sequence[Any], path: str | os.PathLike, title: str, *, clusters: Sequence[int] | None = None,
                   method: str = "auto", seed: int = 0, max_points: int = MAX_PROJECTED) -> dict[str, Any]:
    """A 2-D projection of the embeddings ``X`` coloured by gold type (and, with ``clusters``, a left
    panel coloured by induced cluster). Above ``max_points`` rows a seeded subsample is drawn.
    Returns ``{"path", "method", "points", "of"}``."""
    import numpy as np

    X = np.asarray(X)
    gold = list(gold)
    if len(gold) != len(X) or (clusters is not None and len(clusters) != len(X)):
        raise ValueError(f"projection: {len(X)} vectors but {len(gold)} gold labels"
                         + ("" if clusters is None else f" and {len(clusters)} cluster ids"))
    keep = np.arange(len(X))
    if len(X) > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(len(X), max_points, replace=False))
    xy, used = project_2d(X[keep], method=method, seed=seed)
    types = sorted({str(g) for g in gold})
    colour = {t: i for i, t in enumerate(types)}
    g = np.array([colour[str(gold[i])] for i in keep])
    panels = [("gold type", g)]
    if clusters is not None:
        panels.insert(0, ("induced cluster", np.asarray(clusters)[keep]))
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 6), squeeze=False)
    for ax, (name, lab) in zip(axes[0], panels):
        ax.scatter(xy[:, 0], xy[:, 1], c=_tab20(np.asarray(lab)), cmap="tab20", vmin=0, vmax=19,
                   s=float(np.clip(3000 / max(len(keep), 1), 4, 40)))  # larger dots for fewer points
        ax.set_title(f"coloured by {name}")
        ax.set_xticks([])
        ax.set_yticks([])
    if len(types) <= 20:  # a legend only while every type has its own colour
        from matplotlib.lines import Line2D

        cmap = plt.get_cmap("tab20")
        handles = [Line2D([], [], marker="o", ls="", color=cmap(int(_tab20(colour[t]))), label=t[:28]) for t in types]
        axes[0][-1].legend(handles=handles, fontsize=7, loc="best", framealpha=0.6)
    shown = f"{len(keep)} of {len(X)} points" if len(keep) < len(X) else f"{len(X)} points"
    fig.suptitle(f"{title}\n{used.upper()} of cosine geometry, {shown}, {len(types)} gold types")
    fig.tight_layout()
    return {"path": str(save_png(fig, Path(path))), "method": used, "points": int(len(keep)), "of": int(len(X))}


def _bar_label(row: Mapping[str, Any], varying: Sequence[str]) -> str:
    """The values that tell the row's configuration apart (all of them when nothing varies)."""
    keys = varying or ("representation", "clustering", "variant")
    label = " / ".join(str(row.get(c)) for c in keys if row.get(c) not in (None, ""))
    return label or str(row.get("method") or row.get("metric") or "")


def metric_bars_png(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str, *,
                    max_bars: int = 30) -> Path | None:
    """Horizontal bars of a run's metric rows: one panel per task, the task's headline metrics
    (``evaluation.base.DEFAULT_METRICS``; other tasks: their first three) per configuration
    (the representation / clustering / variant / setting values that differ between rows).
    Fractions are drawn x100. None when no row has a finite value."""
    import math

    import numpy as np

    from ..evaluation.base import DEFAULT_METRICS
    from ..metric_specs import is_fraction

    tasks: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        v = r.get("value")
        if v is not None and math.isfinite(float(v)):
            tasks.setdefault(str(r["task"]), []).append(r)
    if not tasks:
        return None
    panels = []
    for task, rs in tasks.items():
        present = list(dict.fromkeys(str(r["metric"]) for r in rs))
        metrics = [m for m in DEFAULT_METRICS.get(task, ()) if m in present] or present[:3]
        # a panel shows one scale: fractions, else the first metric's own unit
        frac = [m for m in metrics if is_fraction(m)]
        metrics = frac or metrics[:1]
        keys = ("setting", "representation", "clustering", "variant")
        varying = [c for c in keys if len({r.get(c) for r in rs}) > 1]
        confs: dict[str, dict[str, float]] = {}
        for r in rs:
            if r["metric"] in metrics:
                confs.setdefault(_bar_label(r, varying), {})[str(r["metric"])] = float(r["value"])
        first = metrics[0]
        order = sorted(confs.items(), key=lambda kv: -kv[1].get(first, -math.inf))[:max_bars]
        panels.append((task, metrics, order, bool(frac)))
    plt = pyplot()
    heights = [max(1.6, 0.28 * len(order) * len(metrics) + 0.9) for _, metrics, order, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (task, metrics, order, frac) in zip(axes[:, 0], panels):
        scale = 100.0 if frac else 1.0
        y = np.arange(len(order))
        h = 0.8 / len(metrics)
        for j, m in enumerate(metrics):
            vals = [cells.get(m, np.nan) * scale for _, cells in order]
            ax.barh(y + j * h, vals, height=h, label=m)
        ax.set_yticks(y + h * (len(metrics) - 1) / 2, [label[:48] for label, _ in order], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{task}" + (" (x100)" if frac else ""), fontsize=10)
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_png(fig, Path(path))
