"""Plots as run artifacts: the untuned method's 2-D projection (coloured by gold type and induced
cluster), every run's metric bars, and the report showing untuned and trained projections side by side."""
from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.tiny_models import tiny_bert

from eventatlas import config
from eventatlas.io import sha256_file
from eventatlas.tracking.plots import metric_bars_png, project_2d, projection_png


def _png_colours(path: Path) -> set[tuple[int, int, int]]:
    from PIL import Image

    with Image.open(path) as im:
        return {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20)}


# tab20 colours 0 and 2 (the first two gold types)
TAB20_0, TAB20_2 = (31, 119, 180), (255, 127, 14)


def test_pca_projection_separates_two_groups_and_subsamples(tmp_path):
    # two groups along orthogonal directions: on the unit sphere their PCA first axis splits them
    rng = np.random.default_rng(0)
    a = np.array([1.0, 0.0, 0.0]) + 0.01 * rng.normal(size=(60, 3))
    b = np.array([0.0, 1.0, 0.0]) + 0.01 * rng.normal(size=(60, 3))
    X = np.vstack([a, b])
    xy, used = project_2d(X, method="pca")
    assert used == "pca" and xy.shape == (120, 2)
    assert np.sign(xy[:60, 0]).tolist() == [np.sign(xy[0, 0])] * 60
    assert np.sign(xy[60:, 0]).tolist() == [-np.sign(xy[0, 0])] * 60
    gold = ["attack"] * 60 + ["meet"] * 60
    info = projection_png(X, gold, tmp_path / "p.png", "two groups", method="pca", max_points=50, seed=3)
    assert info == {"path": str(tmp_path / "p.png"), "method": "pca", "points": 50, "of": 120}
    assert {TAB20_0, TAB20_2} <= _png_colours(tmp_path / "p.png")  # both gold types drawn in their colours
    with pytest.raises(ValueError, match="120 vectors but 119 gold labels"):
        projection_png(X, gold[:-1], tmp_path / "q.png", "bad")
    assert not (tmp_path / "q.png").exists()


def test_projection_falls_back_to_tsne_without_umap(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "umap", None)  # `import umap` raises ImportError
    from eventatlas.tracking import plots

    monkeypatch.setattr(plots, "AUTO_MIN_NONLINEAR", 20)  # t-SNE of 300 points takes ~30 s on a busy core
    X = np.random.default_rng(1).normal(size=(40, 8))
    xy, used = project_2d(X, method="auto")
    assert used == "tsne" and xy.shape == (len(X), 2) and np.isfinite(xy).all()
    with pytest.raises(ImportError):
        project_2d(X, method="umap")


def test_metric_bars_png(tmp_path):
    rows = [{"task": "induction", "representation": r, "clustering": c, "metric": m, "value": v}
            for r in ("trigger", "mask") for c in ("agglomerative", "manifold")
            for m, v in (("ari", 0.3), ("bcubed_f", 0.5), ("purity", 0.9))]
    rows.append({"task": "naming", "variant": "perfect", "metric": "naming_mean_rank", "value": 2.5})
    out = metric_bars_png(rows, tmp_path / "bars.png", "t")
    from PIL import Image

    with Image.open(out) as im:
        w, h = im.size
    # two panels: induction (ari and bcubed_f, the headline metrics present; purity left out) and naming
    assert w > 500 and h > 300
    assert {TAB20_0, TAB20_2} <= _png_colours(out)  # matplotlib's default cycle: C0 blue, C1 orange
    assert metric_bars_png([{"task": "induction", "metric": "ari", "value": float("nan")}], tmp_path / "n.png",
                           "t") is None


@pytest.fixture
def sample(tmp_path, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", str(tmp_path / "wh.duckdb"))
    from eventatlas.data.ingest import ingest

    man = ingest("ontoevent", config.samples_dir() / "ontoevent")
    ddir = Path(man["path"])
    model = tiny_bert(tmp_path, pq.read_table(ddir / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist(),
                      layers=1)
    return ddir, model


def _run(ddir, model, **extra):
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    params = {"model_id": str(model), "representations": ["sentence", "trigger"], "clusterings": ["agglomerative"],
              "encoder": {"batch_size": 8, "precision": "fp32"}, **extra}
    rec = read_record(run_method("untuned", ddir, seed=0, params=params))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    return rec


def test_untuned_run_lists_projection_and_metric_bars(sample):
    ddir, model = sample
    rec = _run(ddir, model, projection="pca", k_seen=0)  # every sample type clustered
    arts = {a["kind"]: a for a in rec["artifacts"]}
    proj, bars = arts["plot/projection/trigger"], arts["plot/metric_bars"]
    for a in (proj, bars):
        assert Path(a["path"]).is_file() and sha256_file(a["path"]) == a["sha256"]
    params = rec["run"]["params"]
    selected = pq.read_table(config.runs_dir() / rec["run"]["run_id"] / "selected_mentions.parquet")
    assert params["projection"] == {"representation": "trigger", "method": "pca", "points": selected.num_rows,
                                    "of": selected.num_rows}
    assert proj["rows"] == selected.num_rows
    assert len({a["kind"] for a in rec["artifacts"] if a["kind"].startswith("plot/projection/")}) == 1
    # turned off: no projection, the metric bars stay
    off = _run(ddir, model, projection="none")
    kinds = {a["kind"] for a in off["artifacts"]}
    assert "plot/metric_bars" in kinds and not any(k.startswith("plot/projection/") for k in kinds)
    # a representation that is not computed is not drawn, and the params say why
    miss = _run(ddir, model, projection="pca", projection_representation="mask")
    assert "not drawn" in miss["run"]["params"]["projection"]


@pytest.mark.slow
def test_auto_projection_is_umap_from_300_points(tmp_path):
    """umap-learn compiles its kernels on the first call in a process (~30 s on one core)."""
    from eventatlas.tracking.plots import AUTO_MIN_NONLINEAR

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16))
    y = np.arange(AUTO_MIN_NONLINEAR) % 3
    X = centres[y] + 0.05 * rng.normal(size=(len(y), 16))
    assert project_2d(X[:-1], method="auto")[1] == "pca"
    info = projection_png(X, [f"t{v}" for v in y], tmp_path / "u.png", "three groups", method="auto")
    assert info["method"] == "umap" and info["points"] == AUTO_MIN_NONLINEAR
    xy, used = project_2d(X, method="auto")
    # UMAP keeps the three well-separated groups apart: every point is nearer its own group's centre
    cent = np.stack([xy[y == k].mean(0) for k in range(3)])
    nearest = np.argmin(((xy[:, None, :] - cent[None]) ** 2).sum(-1), axis=1)
    assert used == "umap" and (nearest == y).all()


class _Figures(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[dict] = []  # side-by-side rows, each with its figures

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("class") == "side":
            self.rows.append({"dataset": a["data-dataset"], "figures": []})
        if tag == "figure" and self.rows and a["data-kind"].startswith(("plot/projection/", "plot/umap/")):
            self.rows[-1]["figures"].append((a["data-method"], a["data-kind"], a["data-run"]))


def test_report_shows_untuned_and_trained_projections_side_by_side(tmp_path, monkeypatch):
    from PIL import Image
    from typer.testing import CliRunner

    from eventatlas.cli import app
    from eventatlas.store.warehouse import Warehouse

    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", str(tmp_path / "wh.duckdb"))
    png = tmp_path / "p.png"
    Image.new("RGB", (40, 30), (10, 200, 10)).save(png)
    wh = Warehouse()
    wh.migrate()
    row = {"task": "induction", "split": "unseen", "metric": "ari", "value": 0.3, "seed": 0}

    def run(run_id, method, ds, kind, started):
        wh.publish({"run_id": run_id, "flow": "train-all", "method": method, "seed": 0, "status": "completed",
                    "params": {"dataset": ds}, "started_at": started}, [{**row, "dataset": ds, "method": method}],
                   [{"kind": kind, "path": str(png)}, {"kind": "plot/metric_bars", "path": str(png)}])

    run("u-old", "untuned", "onto", "plot/projection/trigger", "2026-11-23T08:00:00")
    run("u-new", "untuned", "onto", "plot/projection/trigger", "2026-11-23T09:00:00")
    run("ba", "batch_attention", "onto", "plot/umap/trigger", "2026-11-23T08:30:00")
    run("u-maven", "untuned", "maven", "plot/projection/trigger", "2026-11-23T08:10:00")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = _Figures()
    html = out.read_text(encoding="utf-8")
    page.feed(html)
    # per dataset one row: the newest untuned projection first, the trained one beside it
    assert page.rows == [
        {"dataset": "maven", "figures": [("untuned", "plot/projection/trigger", "u-maven")]},
        {"dataset": "onto", "figures": [("untuned", "plot/projection/trigger", "u-new"),
                                        ("batch_attention", "plot/umap/trigger", "ba")]}]
    assert "Only the untuned encoder has a projection for this dataset." in html
    # the metric bars appear once per (method, dataset): the newest run's
    bars = [ln for ln in html.split("<figure") if 'data-kind="plot/metric_bars"' in ln]
    assert sorted(b.split('data-run="')[1].split('"')[0] for b in bars) == ["ba", "u-maven", "u-new"]
    assert 'data-run="u-old"' not in html.split('id="projections"')[1].split('id="wiki"')[0]
