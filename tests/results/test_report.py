"""`eventatlas report`: a self-contained HTML page whose numbers are the warehouse's, checked in a
real headless browser (Debian's chromium) when one is installed."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.store.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("EVENTATLAS_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))


def _warehouse(tmp_path: Path) -> Warehouse:
    """Two configurations x two seeds on one dataset, a lower-is-better naming metric, a trained run
    with a learning curve and a plot, a failed run, and two wiki builds with a diff."""
    from PIL import Image

    png = tmp_path / "umap.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(png)
    wh = Warehouse()
    wh.migrate()
    base = {"task": "induction", "dataset": "onto", "split": "unseen", "setting": "10 seen / 40 unseen",
            "method": "untuned", "representation": "trigger"}
    vals = {("agglomerative", 0): (0.50, 0.60), ("agglomerative", 1): (0.46, 0.58),
            ("manifold", 0): (0.40, 0.70), ("manifold", 1): (0.42, 0.66)}
    for seed in (0, 1):
        rows = []
        for algo in ("agglomerative", "manifold"):
            ari, bf = vals[(algo, seed)]
            rows += [{**base, "clustering": algo, "metric": "ari", "value": ari, "seed": seed},
                     {**base, "clustering": algo, "metric": "bcubed_f", "value": bf, "seed": seed}]
        wh.publish({"run_id": f"u{seed}", "flow": "train-all", "method": "untuned", "seed": seed, "status": "completed",
                    "device": "cpu", "code_version": "abc123def4567", "data_fingerprints": {"onto": "f" * 64},
                    "params": {"dataset": "onto", "k_seen": 10}, "started_at": f"2026-11-23T09:0{seed}:00"}, rows)
    nb = {"task": "naming", "dataset": "onto", "split": "unseen", "method": "batch_attention", "seed": 0}
    wh.publish({"run_id": "ba0", "flow": "train-all", "method": "batch_attention", "seed": 0, "status": "completed",
                "device": "cpu", "params": {"dataset": "onto"}, "started_at": "2026-11-23T09:05:00"},
               [{**nb, "variant": "perfect", "metric": "naming_mean_rank", "value": 2.5},
                {**nb, "variant": "ft", "metric": "naming_mean_rank", "value": 4.0},
                {**nb, "variant": "perfect", "metric": "naming_hits@1", "value": 0.5}],
               [{"kind": "plot/umap_trained", "path": str(png)}, {"kind": "plot/missing", "path": "/nope.png"}],
               train_steps=[{"phase": "train", "step": s, "epoch": s // 5, "loss": 2.0 / (1 + s)}
                            for s in range(20)])
    wh.publish({"run_id": "bad", "flow": "train-all", "method": "untuned", "seed": 0, "status": "failed",
                "error": "RuntimeError: boom <on purpose>", "started_at": "2026-11-23T09:06:00"})
    import duckdb

    with duckdb.connect(str(wh.path)) as con:
        con.execute("INSERT INTO wiki_builds VALUES ('b1', 'wikigrounding', '2026-11-01', '{}', '{}', 10, 100, NULL), "
                    "('b2', 'wikigrounding', '2026-11-20', '{}', '{}', 12, 130, 'b1')")
        con.execute("INSERT INTO wiki_build_diffs VALUES ('b2', 'b1', 'en', 3, 1, 40, 10)")
    return wh


class _Cells(HTMLParser):
    """data-* attributes of leaderboard cells, run rows and curves."""

    def __init__(self):
        super().__init__()
        self.cells, self.runs, self.curves, self.links, self.figures, self.text = [], [], [], [], [], []
        self.table = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "data-task" in a:
            self.table = (a["data-task"], a["data-dataset"])
        if tag == "td" and "data-metric" in a:
            self.cells.append({**a, "table": self.table})
        if tag == "tr" and "data-run" in a:
            self.runs.append(a)
        if tag == "polyline":
            self.curves.append(a)
        if tag == "figure":
            self.figures.append(a)
        for k in ("src", "href"):
            if a.get(k):
                self.links.append(a[k])

    def handle_data(self, data):
        self.text.append(data)


def _report(tmp_path) -> tuple[Path, _Cells, Warehouse]:
    wh = _warehouse(tmp_path)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert r.exit_code == 0, r.output
    p = _Cells()
    p.feed(out.read_text(encoding="utf-8"))
    return out, p, wh


def test_report_holds_the_warehouse_numbers(eventatlas_env, tmp_path):
    out, page, wh = _report(tmp_path)
    _, lb = wh.query_rows("SELECT task, dataset, metric, clustering, variant, mean, std FROM leaderboard")
    assert len(page.cells) == len(lb) == 7
    for task, ds, metric, clustering, variant, mean, std in lb:
        (cell,) = [c for c in page.cells if c["table"] == (task, ds) and c["data-metric"] == metric
                   and float(c["data-mean"]) == pytest.approx(mean)]
        assert (cell["data-std"] == "None") == (std is None)
    # hand-computed: ari means 0.48 (agglomerative) / 0.41 (manifold): agglomerative best; bcubed_f 0.59 / 0.68:
    # manifold best; naming_mean_rank 2.5 vs 4.0: lower is better; naming_hits@1 has one row only: no best
    best = {(c["data-metric"], round(float(c["data-mean"]), 4)) for c in page.cells if c["data-best"] == "true"}
    assert best == {("ari", 0.48), ("bcubed_f", 0.68), ("naming_mean_rank", 2.5)}
    html = out.read_text(encoding="utf-8")
    assert "48.0 ± 2.8" in html  # mean ± sample std of 0.50, 0.46, x100
    assert {r["data-run"] for r in page.runs} == {"u0", "u1", "ba0", "bad"}
    assert "RuntimeError: boom &lt;on purpose&gt;" in html  # escaped
    assert [(c["data-run"], c["data-points"]) for c in page.curves] == [("ba0", "20")]
    assert [f["data-kind"] for f in page.figures] == ["plot/umap_trained"]  # the missing file is left out
    outside = [x for x in page.links if not x.startswith("#")]  # the contents list links sections of the page
    assert len(outside) == 1 and outside[0].startswith("data:image/png;base64,")  # nothing fetched: offline
    text = " ".join(page.text)
    assert "Diff of b2 to b1" in text and "<td>en</td><td>3</td><td>1</td><td>40</td><td>10</td>" in html
    assert html.index("<td>b2</td>") < html.index("<td>b1</td>")  # newest build first


CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_report_in_headless_chromium(eventatlas_env, tmp_path):
    out, page, _ = _report(tmp_path)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={tmp_path / 'chromium'}", "--enable-logging=stderr", "--log-level=0"]

    def console(url: str) -> tuple[str, list[str]]:
        r = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout, [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]

    # the console capture works: a page that logs an error is caught
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom-x")</script></body></html>', encoding="utf-8")
    assert any("boom-x" in ln for ln in console(bad.as_uri())[1])
    url = out.resolve().as_uri()
    dom, console_lines = console(url)
    assert console_lines == []  # no console errors (or any message: the page has no script)
    # the browser parsed the page into the same tables and numbers
    seen = _Cells()
    seen.feed(dom)
    assert [c["data-mean"] for c in seen.cells] == [c["data-mean"] for c in page.cells]
    assert len(seen.runs) == 4 and "48.0 ± 2.8" in dom
    r = subprocess.run(flags + ["--window-size=1300,1600", "--hide-scrollbars", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    from PIL import Image

    img = Image.open(shot).convert("L")
    assert img.size == (1300, 1600)
    dark = sum(1 for v in img.getdata() if v < 200) / (img.size[0] * img.size[1])
    assert dark > 0.01, dark  # text, tables and bars were drawn, not a blank page


def test_report_flow_writes_the_page(eventatlas_env, tmp_path):
    """The `report` flow (deployment `report/default`; `train-all` with report=True calls the same task)."""
    from flows.report import report

    _warehouse(tmp_path)
    out = Path(report(str(tmp_path / "r.html")))
    page = _Cells()
    page.feed(out.read_text(encoding="utf-8"))
    assert len(page.cells) == 7 and {r["data-run"] for r in page.runs} == {"u0", "u1", "ba0", "bad"}


def _atlas_warehouse(tmp_path: Path) -> tuple[Warehouse, list[str]]:
    """The report's warehouse plus a small atlas (two inventories, a declared and two learned links)
    whose evidence mentions are real mentions of the ingested MAVEN sample (so sentences resolve)."""
    import pyarrow.parquet as pq
    from support.atlas import publish_atlas_rows

    from eventatlas import config
    from eventatlas.atlas.links import link_row
    from eventatlas.data.ingest import ingest_samples

    wh = _warehouse(tmp_path)
    ingest_samples(names=["maven_sentences"])
    m = pq.read_table(config.datasets_dir() / "maven_subset_sample" / "mentions.parquet",
                      columns=["mention_id", "labels"]).to_pylist()
    ev = [r["mention_id"] for r in m if "Attack" in (r["labels"] or [])][:2]
    nodes = [{"node_id": f"{i}::{t}", "inventory": i, "kind": "type", "type_id": t, "name": t, "n_mentions": n,
              "ontology": o, "evidence_mention_ids": []}
             for i, o, ts in (("maven", "MAVEN", ("Attack", "Arriving", "Riot")), ("fn", "FrameNet", ("Attack", "Arriving")))
             for t, n in zip(ts, (3, 2, 1))]
    links = [link_row("maven::Attack", "fn::Attack", "maps_to", kind="declared", method="hand mapping"),
             link_row("maven::Attack", "fn::Attack", "learned:combined", kind="learned", method="combined", score=0.9,
                      raw_score=0.9, rank=1, evidence=ev),
             link_row("maven::Riot", "fn::Attack", "learned:combined", kind="learned", method="combined", score=0.4,
                      raw_score=0.4, rank=1)]
    publish_atlas_rows(tmp_path, nodes, links)
    return wh, ev


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_atlas_page_in_headless_chromium(eventatlas_env, tmp_path):
    """The report links its atlas page; in a real browser the page draws every node, finds a type from
    the address (#q=...), rings it, and lists its links with the evidence sentences; no console errors."""
    _, ev = _atlas_warehouse(tmp_path)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = out.with_name("report_atlas.html")
    assert page.exists() and 'href="report_atlas.html"' in out.read_text(encoding="utf-8")
    assert "http" not in page.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")  # offline
    from support.atlas import dump_dom

    dom = dump_dom(CHROMIUM, page, "#q=attack", tmp_path)
    assert re.search(r'<svg id="g"[^>]*data-nodes="5"', dom) and dom.count("<circle") == 5
    assert re.search(r'data-edges="3"', dom)  # the declared link + the combined scorer's two rank-1 links
    assert 'data-selected="fn::Attack"' in dom  # the first exact match (nodes in id order)
    assert re.search(r'<div id="hits" data-hits="2">', dom)  # both Attack nodes match (Riot does not)
    info = dom[dom.index('<div id="info">'):]
    assert "maps_to" in info and "combined #1" in info
    assert re.search(r'<div class="ev">[^<]*\[[^<\]]+\][^<]*</div>', info)  # an evidence sentence, trigger in brackets
    assert 'class="sel"' in dom


def test_templates_load_through_the_package_from_any_directory(eventatlas_env, tmp_path, monkeypatch):
    """The report's templates are package data read through importlib (what a wheel installs), not paths
    relative to the working directory."""
    from importlib.resources import files

    import jinja2

    from eventatlas.results import templating
    from eventatlas.results.report import load, render

    wh = _warehouse(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    templating.environment.cache_clear()  # a fresh environment, made in this directory
    env = templating.environment()
    assert isinstance(env.loader, jinja2.PackageLoader)
    shipped = {p.name for p in (files("eventatlas") / "templates").iterdir() if p.is_file()}
    assert {"report.html", "report_charts.svg", "report_benchmarks.html", "report_experiments.html"} <= shipped
    assert set(env.list_templates()) == shipped
    page = render(load(wh))
    assert page.startswith("<!DOCTYPE html>") and "48.0 ± 2.8" in page and '<svg class="curves"' in page
    assert env.from_string("{{ v }}").render(v='<b a="1">') == "&lt;b a=&#34;1&#34;&gt;"  # escapes by default
