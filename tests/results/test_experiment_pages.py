"""The experiment pages and the report say what they show: a paper's figure and the project's own earlier
one are labelled apart, runs of different precision are marked, plots are small images beside the page
(embedded, never a path into a data root), quick pages are smoke tests; the report has a contents list, one
learning-curve chart per method with named axes and a legend, and marks a best only where there is one."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from eventatlas import config
from eventatlas.store.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "results"
FIXTURE = REPO / "tests" / "fixtures" / "experiments"


def _declaration(tmp_path: Path) -> Path:
    """untuned_baselines with two reference sources: a paper's figure for the trigger row, the project's own
    earlier one for the sentence row."""
    data = yaml.safe_load((config.REPO_ROOT / "experiments" / "untuned_baselines.yaml").read_text())
    data["references"] = [
        {"source": {"paper": "Edwards & Ji 2023", "table": "Table 2", "setting": "10 seen / 40 unseen"},
         "values": {"OntoEvent trigger (ARI)": {"agglomerative": 48, "manifold": 46}}},
        {"source": {"kind": "own", "paper": "eventatlas measurement (docs/methods/untuned.md)", "table": "bf16 rows"},
         "values": {"OntoEvent sentence (ARI)": {"agglomerative": 19.5, "manifold": 19.7}}}]
    p = tmp_path / "untuned_baselines.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _png(path: Path, size: tuple[int, int]) -> Path:
    """A plot-like PNG: white, a few coloured bars and lines."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    for i in range(8):
        d.rectangle([40, 40 + i * 90, 40 + (i + 1) * 150, 100 + i * 90], fill=(30 * i, 120, 255 - 30 * i))
        d.line([0, i * 100, size[0], size[1] - i * 50], fill=(200, 40, 40), width=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def _publish(tmp_path: Path, precisions: dict[str, str], plot: Path | None = None) -> tuple[Warehouse, str]:
    """The declaration's onto cell answered by one run (trigger and sentence ARI for both clusterings) and
    its fn cell by another, with the given precisions ({"onto": "bf16", "fn": "fp32"})."""
    from eventatlas.experiments import load
    from eventatlas.store.publishing import publish_experiment

    exp = load(str(_declaration(tmp_path)))
    wh = Warehouse()
    wh.migrate()
    base = {"task": "induction", "split": "unseen", "method": "untuned", "seed": 0}
    values = {("onto", "trigger", "agglomerative"): 0.487, ("onto", "trigger", "manifold"): 0.466,
              ("onto", "sentence", "agglomerative"): 0.181, ("onto", "sentence", "manifold"): 0.194,
              ("fn", "trigger", "agglomerative"): 0.532, ("fn", "trigger", "manifold"): 0.561}
    datasets = {"onto": "ontoevent_maven", "fn": "framenet_fulltext"}
    links = []
    for alias, ds in datasets.items():
        rows = [{**base, "dataset": ds, "representation": rep, "clustering": algo,
                 "metric": "bcubed_f" if alias == "fn" else "ari", "value": v}
                for (a, rep, algo), v in values.items() if a == alias]
        if alias == "fn":  # the purity row of the table
            rows += [{**r, "metric": "purity_f", "value": r["value"] + 0.1} for r in rows]
        run_id = f"untuned-{ds}-s0"
        arts = [{"kind": "plot/metric_bars", "path": str(plot)}] if plot and alias == "onto" else []
        wh.publish({"run_id": run_id, "flow": "experiment", "method": "untuned", "seed": 0, "status": "completed",
                    "code_version": "v1", "params": {"dataset": ds, "config": {"precision": precisions[alias]}},
                    "started_at": "2026-11-20T10:00:00"}, rows, arts)
        links.append({"cell": f"untuned@{alias}", "seed": 0, "run_id": run_id, "reused": False})
    publish_experiment(exp, links)
    return wh, exp.name


def _page(wh: Warehouse, tmp_path: Path, mode: str = "full") -> str:
    from eventatlas.results.experiments import write_markdown

    (page,) = [p for p in write_markdown(tmp_path / "pages", wh) if p.name.count(".") == (2 if mode == "quick" else 1)]
    return page.read_text(encoding="utf-8")


def test_a_paper_figure_and_an_own_earlier_one_are_labelled_apart(eventatlas_env, tmp_path):
    wh, _ = _publish(tmp_path, {"onto": "fp32", "fn": "fp32"})
    _, kinds = wh.query_rows("SELECT DISTINCT paper, kind FROM experiment_references ORDER BY kind")
    assert kinds == [("eventatlas measurement (docs/methods/untuned.md)", "own"), ("Edwards & Ji 2023", "paper")]
    page = _page(wh, tmp_path)
    # the paper's figure bare in brackets, the earlier one labelled as such in its brackets
    assert "| OntoEvent trigger (ARI) | 48.7 (n=1) [48.0] | 46.6 (n=1) [46.0] |" in page
    assert ("| OntoEvent sentence (ARI) | 18.1 (n=1) [earlier measurement: 19.5] | 19.4 (n=1) "
            "[earlier measurement: 19.7] |") in page
    assert "In brackets: the paper's figures, from Edwards & Ji 2023, Table 2 (10 seen / 40 unseen)." in page
    assert ('Marked "earlier measurement": this project\'s own earlier figures, not a paper\'s, from eventatlas '
            "measurement (docs/methods/untuned.md), bf16 rows.") in page
    # the goal (within 2, two-sided) still judges both: 48.7 - 48 = +0.7, 18.1 - 19.5 = -1.4, 19.4 - 19.7 = -0.3
    assert "- OntoEvent trigger (ARI) / agglomerative: 48.7 vs paper 48.0 (+0.7; allowed ±2)" in page
    assert "- OntoEvent sentence (ARI) / agglomerative: 18.1 vs earlier measurement 19.5 (-1.4; allowed ±2)" in page
    assert "**Status: met.**" in page
    # the own figure is never called a paper's
    own_lines = [ln for ln in page.splitlines() if "19.5" in ln or "eventatlas measurement" in ln]
    assert own_lines and not any("paper 19.5" in ln or "paper's figures, from eventatlas" in ln for ln in own_lines)
    # the report labels them the same way
    from eventatlas.results.experiments import html_section, load

    html = html_section(load(wh, "full"))
    assert html.count('data-reference-label="paper"') == 2
    assert html.count('data-reference-label="earlier measurement"') == 2
    assert "Earlier measurement (the project&#39;s own, not a paper&#39;s): eventatlas measurement" in html


def test_a_warehouse_from_before_the_kind_column_reads_as_papers(eventatlas_env, tmp_path):
    import duckdb

    wh, _ = _publish(tmp_path, {"onto": "fp32", "fn": "fp32"})
    with duckdb.connect(str(wh.path)) as con:  # as migration 012 left it
        con.execute("DROP VIEW experiment_results")
        con.execute("ALTER TABLE experiment_references DROP COLUMN kind")
        con.execute("DELETE FROM schema_version WHERE version = 13")
    views = (config.REPO_ROOT / "warehouse" / "views.sql").read_text(encoding="utf-8")
    with duckdb.connect(str(wh.path)) as con:
        con.execute(views)
    page = _page(wh, tmp_path)
    # two papers now (rows before the column are papers): numbered, each cell saying which
    assert "[earlier measurement" not in page and "| 48.7 (n=1) [paper 1: 48.0] |" in page
    assert "| 18.1 (n=1) [paper 2: 19.5] |" in page
    assert 'Marked "paper 2": a paper\'s figures, from eventatlas measurement' in page
    wh.migrate()  # the column comes back, every old row a paper's
    _, kinds = wh.query_rows("SELECT DISTINCT kind FROM experiment_references")
    assert kinds == [("paper",)]


def test_runs_of_different_precision_are_marked_on_the_page(eventatlas_env, tmp_path):
    wh, _ = _publish(tmp_path, {"onto": "bf16", "fn": "fp32"})
    page = _page(wh, tmp_path)
    assert "| OntoEvent trigger (ARI) | 48.7 (n=1, bf16) [48.0] | 46.6 (n=1, bf16) [46.0] |" in page
    assert "| FrameNet verbs trigger (B-cubed F) | 53.2 (n=1, fp32) | 56.1 (n=1, fp32) |" in page
    assert "The runs differ in precision (bf16, fp32): each figure names its runs'." in page
    assert "- untuned@onto seed 0: `untuned-ontoevent_maven-s0` completed, bf16" in page
    from eventatlas.results.experiments import html_section, load

    html = html_section(load(wh, "full"))
    assert "48.7 (n=1, bf16)" in html and "The runs differ in precision (bf16, fp32)" in html


def test_one_precision_is_not_marked_in_the_cells(eventatlas_env, tmp_path):
    wh, _ = _publish(tmp_path, {"onto": "fp32", "fn": "fp32"})
    page = _page(wh, tmp_path)
    assert "(n=1, fp32)" not in page and "differ in precision" not in page
    assert "- untuned@fn seed 0: `untuned-framenet_fulltext-s0` completed, fp32" in page


def test_a_plot_is_copied_small_beside_the_page_and_embedded(eventatlas_env, tmp_path):
    from PIL import Image

    from eventatlas.results.experiments import IMAGE_BYTES, IMAGE_PX

    big = _png(tmp_path / "data" / "runs" / "untuned-ontoevent_maven-s0" / "metric_bars.png", (1600, 1200))
    wh, name = _publish(tmp_path, {"onto": "fp32", "fn": "fp32"}, plot=big)
    page = _page(wh, tmp_path)
    img = tmp_path / "pages" / "images" / name / "untuned_onto-s0-metric_bars.png"
    assert "![plot/metric_bars, untuned@onto, seed 0](images/untuned_baselines/untuned_onto-s0-metric_bars.png)" in page
    assert "runs/untuned-ontoevent_maven-s0" not in page and str(tmp_path) not in page  # no path into a data root
    with Image.open(img) as im:
        assert im.size == (800, 600) and im.mode == "P"  # 1600 x 1200 halved, 256 colours
    assert img.stat().st_size <= IMAGE_BYTES and IMAGE_PX == 800
    first = img.read_bytes()
    _page(wh, tmp_path)  # written again: the same bytes (a regenerated page equals the committed one)
    assert img.read_bytes() == first
    # the quick page is a smoke test: no plots, no reference figures, no full-run prose
    quick_exp = tmp_path / "untuned_baselines.yaml"
    from eventatlas.experiments import load
    from eventatlas.store.publishing import publish_experiment

    publish_experiment(load(str(quick_exp), quick=True), [{"cell": "untuned@onto", "seed": 0,
                                                          "run_id": "untuned-ontoevent_maven-s0", "reused": False}])
    quick = _page(wh, tmp_path, "quick")
    assert "**A smoke test.**" in quick and "![" not in quick and "## Plots" not in quick
    assert "[48.0]" not in quick and "earlier measurement" not in quick and "## Diagnosis" not in quick
    assert "The frozen encoder (all-MiniLM-L6-v2)" not in quick  # the full run's description


def test_a_missing_plot_is_counted_not_listed(eventatlas_env, tmp_path):
    wh, _ = _publish(tmp_path, {"onto": "fp32", "fn": "fp32"}, plot=tmp_path / "gone" / "metric_bars.png")
    page = _page(wh, tmp_path)
    assert ("1 plot of these runs (each cell's lowest seed) was not kept with the records this page was written "
            "from, so it is not shown.") in page
    assert "metric_bars.png" not in page and "## Plots" not in page


def test_small_png_shrinks_until_it_fits_and_keeps_a_small_copy_as_it_is(tmp_path):
    from PIL import Image

    from eventatlas.results.experiments import small_png

    src = _png(tmp_path / "tall.png", (900, 3000))
    out = small_png(src, tmp_path / "o" / "tall.png")
    with Image.open(out) as im:  # 800 wide would be 2,667 high: the height cap (1,600) decides, 480 x 1600
        assert im.size == (480, 1600)
    again = small_png(out, tmp_path / "o" / "again.png")  # already small: copied byte for byte
    assert again.read_bytes() == out.read_bytes()
    noise = tmp_path / "noise.png"
    import numpy as np

    Image.fromarray(np.random.default_rng(0).integers(0, 255, (800, 800, 3), dtype=np.uint8)).save(noise)
    assert small_png(noise, tmp_path / "o" / "noise.png", max_bytes=20_000) is None  # noise never fits
    assert not (tmp_path / "o" / "noise.png").exists()


def test_committed_page_images_are_the_fixtures_plots_and_embedded():
    """Every image under docs/results/images is embedded by a committed page, is small, and is the fixture's
    copy of the plot its caption names (a regeneration writes the same bytes); every embedded image exists."""
    import json

    from PIL import Image

    from eventatlas.results.experiments import IMAGE_BYTES, IMAGE_PX

    images = sorted((PAGES / "images").rglob("*.png"))
    embedded = {}
    for page in PAGES.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for src, kind, run_id in re.findall(r"!\[[^\]]*\]\((images/[^)]+)\)\n\n\*`([^`]+)`: cell [^,]+, seed \d+, "
                                            r"run `([^`]+)`\*", text):
            embedded[PAGES / src] = (kind, run_id)
        assert "`runs/" not in text, page.name  # no path into a data root
        if page.name.endswith(".quick.md"):
            assert "![" not in text, page.name
    assert set(images) == set(embedded) and images, "an image no page embeds, or an embedded one missing"
    for img, (kind, run_id) in embedded.items():
        rec = json.loads((FIXTURE / "runs" / run_id / "run.json").read_text(encoding="utf-8"))
        (art,) = [a for a in rec["artifacts"] if a["kind"] == kind]
        assert img.read_bytes() == (FIXTURE / "runs" / run_id / art["path"]).read_bytes(), img
        with Image.open(img) as im:
            assert im.width <= IMAGE_PX and im.height <= 2 * IMAGE_PX
        assert img.stat().st_size <= IMAGE_BYTES


# ----------------------------------------------------------------------------- the report
def _report_warehouse() -> Warehouse:
    """Two configurations on one dataset: ari 0.0 vs -0.1 (the best is a 0), bcubed_f equal on both, and a
    lower-is-better rank that differs (the one best to mark); training steps of two methods."""
    wh = Warehouse()
    wh.migrate()
    base = {"task": "induction", "dataset": "onto", "split": "unseen", "method": "untuned", "seed": 0}
    rows = []
    for algo, ari in (("agglomerative", 0.0), ("manifold", -0.1)):
        rows += [{**base, "clustering": algo, "metric": "ari", "value": ari},
                 {**base, "clustering": algo, "metric": "bcubed_f", "value": 0.5}]
    wh.publish({"run_id": "u0", "flow": "train-all", "method": "untuned", "seed": 0, "status": "completed",
                "params": {"dataset": "onto"}, "started_at": "2026-11-23T09:00:00"}, rows)
    nb = {"task": "naming", "dataset": "onto", "split": "unseen", "method": "batch_attention", "seed": 0}
    for method, run_id, k in (("batch_attention", "ba0", 2.0), ("frame_dml", "fd0", 5.0)):
        wh.publish({"run_id": run_id, "flow": "train-all", "method": method, "seed": 0, "status": "completed",
                    "params": {"dataset": "onto"}, "started_at": "2026-11-23T09:05:00"},
                   [{**nb, "method": method, "variant": "perfect", "metric": "naming_mean_rank", "value": k}],
                   train_steps=[{"phase": "train", "step": s, "epoch": 0, "loss": k / (1 + s)} for s in range(10)])
    return wh


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.contents, self.cells, self.svgs, self.legend, self.text = set(), [], [], [], [], []
        self._nav = False
        self._svg = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        self._nav = self._nav or tag == "nav"
        if self._nav and tag == "a":
            self.contents.append(a["href"])
        if tag == "td" and "data-metric" in a:
            self.cells.append(a)
        if tag == "svg" and a.get("class") == "curves":
            self._svg = {"method": a["data-method"], "lines": 0, "labels": []}
            self.svgs.append(self._svg)
        if tag == "polyline" and self._svg is not None:
            self._svg["lines"] += 1
        if tag == "li" and "data-run" in a:
            self.legend.append(a["data-run"])

    def handle_endtag(self, tag):
        self._nav = self._nav and tag != "nav"
        if tag == "svg":
            self._svg = None

    def handle_data(self, data):
        if self._svg is not None and data.strip():
            self._svg["labels"].append(data.strip())


def test_report_has_contents_curves_per_method_and_no_empty_best(eventatlas_env, tmp_path):
    from eventatlas.results.report import load, render

    page = _Page()
    page.feed(render(load(_report_warehouse())))
    # the contents list links every section, and every link has its target
    assert {"#task-induction", "#task-naming", "#experiments", "#curves", "#curves-batch_attention",
            "#curves-frame_dml", "#projections", "#plots", "#benchmarks", "#runs"} <= set(page.contents)
    assert all(h[1:] in page.ids for h in page.contents), [h for h in page.contents if h[1:] not in page.ids]
    # best: ari's best is 0.0 and bcubed_f is 50.0 on both rows: neither marked; the rank 2.0 < 5.0 is
    marked = {(c["data-metric"], c["data-mean"]) for c in page.cells if c["data-best"] == "true"}
    assert marked == {("naming_mean_rank", "2.0")}
    # one chart per method, axes named, one polyline and one legend entry per run
    assert [(s["method"], s["lines"]) for s in page.svgs] == [("batch_attention", 1), ("frame_dml", 1)]
    for s in page.svgs:
        assert "step" in s["labels"] and "loss" in s["labels"], s
        assert not any("seed" in x for x in s["labels"])  # the legend is HTML under the chart, not cut-off SVG text
    assert page.legend.count("ba0") == 1 and page.legend.count("fd0") == 1


@pytest.mark.parametrize("values, marked", [((0.5, 0.5), set()), ((0.0, 0.0), set()), ((0.0, -0.2), set()),
                                             ((0.4, 0.6), {"ari"})])
def test_best_is_marked_only_where_it_tells_something(values, marked):
    from eventatlas.results.report import _best_marked
    from eventatlas.results.leaderboard import build

    board = [{"task": "induction", "dataset": "d", "split": "unseen", "setting": None, "method": "m",
              "trained_on": None, "representation": "trigger", "clustering": algo, "variant": None,
              "precision": None, "metric": "ari", "mean": v, "std": None, "n_seeds": 1, "best": None}
             for algo, v in zip(("agglomerative", "manifold"), values)]
    (t,) = build(board, set())
    assert _best_marked(t) == marked
