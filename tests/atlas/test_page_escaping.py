"""Data never becomes markup: JSON inside the atlas pages' <script> (the exported page and the report's),
HTML in the Markdown results pages, formulas in CSV exports."""
from __future__ import annotations

import csv
import json
import re

import pytest

from support.atlas import CHROMIUM, dump_dom, publish_atlas_rows
from eventatlas.atlas.links import link_row

HOSTILE = ["<!--<script>", "</script><script>alert(1)</script>", "a\u2028b\u2029c & <b>d</b>"]


def script_end(page: str, start: int) -> int:
    """Where a browser ends the script element whose text starts at ``start``: the HTML tokenizer's script
    data states (a ``<!--`` escapes, ``<script`` inside it double-escapes, and a ``</script`` there does not
    end the element); -1 when the element never ends."""
    state, i, low = "data", start, page.lower()

    def tag(at: int, name: str) -> bool:
        return low.startswith(name, at) and at + len(name) < len(low) and low[at + len(name)] in " \t\n\f/>"

    while i < len(page):
        if state in ("escaped", "double") and page.startswith("-->", i):
            state, i = "data", i + 3
        elif state == "data" and page.startswith("<!--", i):
            state, i = "escaped", i + 4
        elif tag(i, "</script"):
            if state == "double":
                state = "escaped"
            else:
                return i
            i += 8
        elif state == "escaped" and tag(i, "<script"):
            state, i = "double", i + 7
        else:
            i += 1
    return -1


def _nodes_links():
    inv = "a<script>"  # the report lists inventories by name
    nodes = [{"node_id": f"{inv}::t{i}", "inventory": inv, "kind": "type", "type_id": f"t{i}", "name": n,
              "n_mentions": 1} for i, n in enumerate(HOSTILE)]
    nodes.append({"node_id": "fn::Attack", "inventory": "fn", "kind": "type", "type_id": "Attack", "name": "Attack",
                  "n_mentions": 1})
    links = [link_row(f"{inv}::t0", "fn::Attack", "learned:centroid_similarity", kind="learned", method="centroid",
                      score=0.5, raw_score=0.5, rank=1, evidence=["m1"])]
    return nodes, links


def check_page(page: str) -> dict:
    """The page's data script ends where the template's does, its text is the data as JSON, and the
    program script after it is the template's, byte for byte."""
    from eventatlas.atlas.page import PAGE

    opening = '<script id="data" type="application/json">'
    start = page.index(opening) + len(opening)
    end = script_end(page, start)
    tail = PAGE[PAGE.index("__DATA__") + len("__DATA__"):]
    assert end != -1 and page[end:] == tail, "the data swallowed the page's script"
    prog = end + len("</script>\n<script>")
    assert script_end(page, prog) == len(page) - len("</script></body></html>\n")
    return json.loads(page[start:end])


def test_hostile_type_names_on_the_exported_atlas_page(tmp_path):
    from eventatlas.atlas.export import export

    nodes, links = _nodes_links()
    (path,) = export(nodes, links, "html", tmp_path, sentences={"m1": "They [met] </script><!--"})
    data = check_page(path.read_text(encoding="utf-8"))
    assert [n["name"] for n in data["nodes"]] == HOSTILE + ["Attack"]
    assert data["sentences"] == {"m1": "They [met] </script><!--"}


def test_hostile_type_names_on_the_reports_atlas_page(eventatlas_env, tmp_path):
    from eventatlas.results.report import write_report
    from eventatlas.store.warehouse import Warehouse

    nodes, links = _nodes_links()
    publish_atlas_rows(tmp_path, [{**n, "evidence_mention_ids": []} for n in nodes], links)
    out = write_report(tmp_path / "report.html", Warehouse())
    report = out.read_text(encoding="utf-8")
    assert "<script" not in report and 'href="report_atlas.html"' in report
    data = check_page(out.with_name("report_atlas.html").read_text(encoding="utf-8"))
    assert [n["name"] for n in data["nodes"]] == HOSTILE + ["Attack"]  # the warehouse's order: node id




@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_hostile_names_keep_the_page_working_in_headless_chromium(tmp_path):
    from eventatlas.atlas.export import export

    nodes, links = _nodes_links()
    (path,) = export(nodes, links, "html", tmp_path)
    dom = dump_dom(CHROMIUM, path, "#q=script", tmp_path)
    assert re.search(r'<svg id="g"[^>]*data-nodes="4"', dom)  # the graph drew every node
    assert re.search(r'<div id="hits" data-hits="2">', dom)  # the search found both script names
    assert "<script>alert" not in dom.split('id="info"', 1)[1]  # shown as text, not markup


# ----------------------------------------------------------------------------- the HTML report
# a script that would log to the console if it ran (dump_dom fails on any console line), and both quotes
INJECTED = '</script><script>console.error("injected")</script>"\'&'


def _report_data(name: str) -> dict:
    """The report's input (report.load's shape) with ``name`` as dataset, method, run fields and atlas names."""
    row = {"task": "induction", "dataset": name, "split": "unseen", "setting": None, "method": name,
           "trained_on": None, "representation": "trigger", "clustering": "agglomerative", "variant": None,
           "precision": None, "metric": "ari", "mean": 0.5, "std": 0.1, "n_seeds": 2, "best": True}
    run = {"run_id": "r1", "flow": "train-all", "method": name, "status": "completed", "seed": 0, "device": "cpu",
           "code_version": None, "data_fingerprints": json.dumps({name: "f" * 64}),
           "params": json.dumps({"dataset": name}), "started_at": None, "finished_at": None, "error": name}
    return {"board": [row], "lower": set(), "runs": [run], "warehouse": "wh.duckdb",
            "steps": [("r1", name, 0, name, "train", s, 1.0 / (1 + s)) for s in range(3)], "plots": [],
            "builds": [], "diffs": [], "benchmarks": [], "experiments": [],
            "atlas": {"inventories": [(name, "type", 3)], "links": [("learned", name, 1)]},
            "atlas_page": "report_atlas.html"}


def test_report_templates_escape_names_in_text_and_attributes():
    from html.parser import HTMLParser

    from eventatlas.results.report import render

    page = render(_report_data(INJECTED))
    assert "<script" not in page.lower()

    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.attrs, self.text = [], []

        def handle_starttag(self, tag, attrs):
            self.attrs += [(tag, k, v) for k, v in attrs]

        def handle_data(self, data):
            self.text.append(data)

    p = Page()
    p.feed(page)
    # the attribute value and the text parse back to the name, quotes and all
    assert ("table", "data-dataset", INJECTED) in p.attrs and ("tr", "data-status", "completed") in p.attrs
    assert sum(INJECTED in t for t in p.text) >= 6  # heading, cell, bar label, curve legend, run row, atlas


def test_report_experiments_section_shows_html_in_labels_as_text():
    from eventatlas.results.experiments import html_section

    e = _experiment("<script>alert(1)</script> \"x\"")
    e["cells"][0]["mean"] = 0.4  # the raw value, beside the shown one
    page = html_section([e])
    # title, row label, reason, run link; and the page's own markup is there
    assert "<script" not in page and page.count("&lt;script&gt;alert(1)&lt;/script&gt; &#34;x&#34;") == 4
    assert 'data-mean="0.4"' in page and 'class="verdict"' in page


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_hostile_names_in_the_report_run_no_script_in_headless_chromium(tmp_path):
    from eventatlas.results.report import render

    page = tmp_path / "report.html"
    page.write_text(render(_report_data(INJECTED)), encoding="utf-8")
    dom = dump_dom(CHROMIUM, page, "", tmp_path)  # fails on any console line: the injected script did not run
    assert "<script" not in dom.lower() and dom.count('data-dataset="') == 1


# ----------------------------------------------------------------------------- Markdown pages
def _experiment(label: str) -> dict:
    cell = {"row_label": label, "col_label": "agglomerative", "metric": "ari", "mean_shown": 40.0, "std_shown": None,
            "n": 1, "n_configs": 1, "reference": None, "higher_is_better": True, "chosen_on_test": False}
    return {"experiment": "exp", "mode": "full", "title": f"Title {label}",
            "description": "Run `<name>` first; a <= b.",
            "cells": [cell], "verdict": ("not judged", [f"{label}: no value"]), "sources": [], "goal": "g",
            "diagnosis": None, "plots": [], "runs": [{"cell": label, "seed": 0, "run_id": "r1", "status": "completed",
                                                      "reused": False, "code_version": "v"}],
            "spec_sha256": "x"}


def test_markdown_results_page_shows_html_in_labels_as_text():
    from eventatlas.results.experiments import markdown

    page = markdown(_experiment("<script>alert(1)</script> &amp;"))
    assert "<script" not in page and "&lt;script>alert(1)&lt;/script> &amp;amp;" in page
    assert page.count("&lt;script>") == 4  # title, table row, reason, run list
    # the page's own comment stays a comment; code spans and a plain "<=" are left as written
    assert "\n<!-- generated by `eventatlas report --markdown DIR`" in page
    assert "Run `<name>` first; a <= b." in page


def test_benchmarks_page_shows_html_in_values_as_text():
    from eventatlas.results.report import benchmarks_markdown

    row = {"run_id": "r", "benchmark": "<script>x</script>", "setting": "<img src=x onerror=alert(1)>",
           "quantity": "s", "higher_is_better": False, "ours_label": "eventatlas", "baseline_label": "other",
           "ours": 1.0, "baseline": 2.0, "ratio": 2.0, "precision": "fp32", "device": "cpu", "cpu_model": "c",
           "gpu_model": None, "threads": 1, "loadavg_start": None, "loadavg_end": None, "code_version": "v",
           "finished_at": "2026-01-01T00:00:00"}
    page = benchmarks_markdown([row])
    assert "<script" not in page and "<img" not in page and "&lt;img src=x" in page
    assert page.count("<!--") == 1  # the page's own comment


# ----------------------------------------------------------------------------- CSV
def test_csv_export_neutralises_formulas_and_keeps_numbers(tmp_path):
    from eventatlas.atlas.export import export

    names = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "@SUM(A1:A2)", "-1+2", "\tx", "\rx", "-0.5",
             "plain"]
    nodes = [{"node_id": f"a::{i}", "inventory": "a", "kind": "type", "type_id": str(i), "name": n, "n_mentions": -1,
              "evidence_mention_ids": ["=bad", "ok"]} for i, n in enumerate(names)]
    links = [link_row("a::0", "a::1", "learned:centroid_similarity", kind="learned", method="centroid", score=-0.5,
                      raw_score=0.25, rank=1)]
    nodes_csv, links_csv = export(nodes, links, "csv", tmp_path)
    rows = list(csv.DictReader(nodes_csv.open(encoding="utf-8", newline="")))
    assert [r["name"] for r in rows] == ["'=HYPERLINK(\"http://x\",\"y\")", "'+cmd|' /C calc'!A0", "'@SUM(A1:A2)",
                                         "'-1+2", "'\tx", "'\rx", "-0.5", "plain"]
    assert {r["n_mentions"] for r in rows} == {"-1"} and rows[0]["evidence_mention_ids"] == "'=bad|ok"
    (link,) = csv.DictReader(links_csv.open(encoding="utf-8", newline=""))
    assert link["score"] == "-0.5" and link["raw_score"] == "0.25"  # numbers stay numbers


def test_search_csv_output_neutralises_formulas(eventatlas_env, tmp_path):
    """`eventatlas search -o x.csv` writes the corpus's sentences: one starting with "=" is text there."""
    from typer.testing import CliRunner

    from eventatlas import config
    from eventatlas.cli import app
    from eventatlas.io import DatasetWriter

    sents = ["=HYPERLINK(\"http://x\") The rebels attacked the fort .", "-2+3 troops attacked the town .",
             "The army arrived at dawn ."]
    with DatasetWriter(config.datasets_dir() / "formulas", "formulas") as w:
        w.write("event_types", {"dataset": "formulas", "type_id": "Attack", "name": "Attack", "ontology": "other"})
        for i, s in enumerate(sents):
            trig = "attacked" if "attacked" in s else "arrived"
            a = s.index(trig)
            w.write("mentions", {"mention_id": f"m{i}", "dataset": "formulas", "doc_id": "d", "sentence": s,
                                 "trigger_start": a, "trigger_end": a + len(trig), "trigger": trig,
                                 "labels": ["Attack"], "split": "all"})
        w.commit({"reader": "test"})
    ex = tmp_path / "ex.jsonl"
    ex.write_text(json.dumps("Gunmen [attacked] the embassy .") + "\n")
    out = tmp_path / "res.csv"
    r = CliRunner().invoke(app, ["search", "--dataset", "formulas", "--examples", str(ex), "--top", "3",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert sorted(r["sentence"] for r in rows) == sorted(["'" + sents[0], "'" + sents[1], sents[2]])
    assert all(float(r["score"]) == float(r["score"]) for r in rows)  # the scores are numbers still
