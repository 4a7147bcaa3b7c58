"""The report's benchmarks section, on a warehouse filled through the real benchmark record + publish path."""
from __future__ import annotations

import argparse
import re

import pytest

from eventatlas.results.report import benchmarks_html, benchmarks_markdown, load, load_benchmarks, render
from eventatlas.store import benchmarking
from eventatlas.store.warehouse import Warehouse
from eventatlas.tracking import records


def _publish(monkeypatch, version: str, cases: list[dict], smoke: bool = False) -> str:
    monkeypatch.setattr(records, "code_version", lambda: version)
    args = argparse.Namespace(smoke=smoke, publish=True, data_root=None)
    bench = benchmarking.Benchmark("encode", args)
    bench.finish(cases, {"note": "fixture"})
    return bench.run_id


def _encode_cases(ours: float, baseline: float, secs: tuple[float, float]) -> list[dict]:
    return [benchmarking.case("sentences/s", ours, baseline, higher_is_better=True, setting="fp32",
                              baseline_label="sentence-transformers", precision="fp32",
                              ours_samples=[ours - 1, ours, ours + 1]),
            benchmarking.case("s", secs[0], secs[1], higher_is_better=False, setting="fp32",
                              baseline_label="sentence-transformers", precision="fp32")]


@pytest.fixture
def bench_warehouse(eventatlas_env, monkeypatch):
    old = _publish(monkeypatch, "0.1.0+gaaaa", _encode_cases(200.0, 250.0, (5.0, 4.0)))
    new = _publish(monkeypatch, "0.1.0+gbbbb", _encode_cases(300.0, 250.0, (2.0, 5.0)))
    smoke = _publish(monkeypatch, "0.1.0+gcccc", _encode_cases(9.0, 1.0, (1.0, 9.0)), smoke=True)
    return Warehouse(), old, new, smoke


def test_ratio_is_how_many_times_better_in_either_direction():
    assert benchmarking.ratio(300, 250, True) == pytest.approx(1.2)
    assert benchmarking.ratio(2, 5, False) == pytest.approx(2.5)  # seconds: 5 / 2
    assert benchmarking.ratio(None, 5, False) is None and benchmarking.ratio(3, 0, True) is None


def test_latest_ratio_both_arms_machine_and_history(bench_warehouse):
    wh, old, new, smoke = bench_warehouse
    rows = load_benchmarks(wh)
    assert {r["run_id"] for r in rows} == {old, new}  # a smoke run's figures are never shown
    html = render(load(wh))
    section = html[html.index('<h2 id="benchmarks">'):html.index('<h2 id="runs">')]
    latest = section[section.index('class="benchmarks-latest"'):section.index("</table>")]
    trs = re.findall(r"<tr data-benchmark=.*?</tr>", latest)
    assert len(trs) == 2  # fp32 sentences/s and fp32 s, each once: the newest run's
    thr = next(t for t in trs if 'data-quantity="sentences/s"' in t)
    assert f'data-run="{new}"' in thr and "0.1.0+gbbbb" in thr
    assert re.search(r'data-ours="300.0"', thr) and re.search(r'data-baseline="250.0"', thr)
    assert float(re.search(r'data-ratio="([^"]+)"', thr).group(1)) == pytest.approx(1.2)
    assert "sentence-transformers: 250" in thr and "eventatlas: 300" in thr
    secs = next(t for t in trs if 'data-quantity="s"' in t)
    assert float(re.search(r'data-ratio="([^"]+)"', secs).group(1)) == pytest.approx(2.5)  # lower is better: 5 / 2
    from eventatlas.modeling.device import cpu_name

    assert cpu_name() in thr  # the machine it ran on
    hist = section[section.index('class="benchmark-history"'):]
    hist = hist[:hist.index("</table>")]
    versions = re.findall(r"<tr data-run=\"[^\"]+\"><td>([^<]+)</td>", hist)
    assert versions == ["0.1.0+gbbbb"] * 2 + ["0.1.0+gaaaa"] * 2  # newest first, every run of every version
    ratios = [float(x) for x in re.findall(r'data-ratio="([^"]+)"', hist)]
    assert ratios[2:] == pytest.approx([0.8, 0.8])  # 200 / 250 sentences/s; 4 / 5 s
    assert smoke not in section


def test_no_benchmark_says_how_to_get_one(eventatlas_env):
    wh = Warehouse()
    wh.migrate()
    assert load_benchmarks(wh) == []
    assert "make bench" in benchmarks_html([])
    assert '<h2 id="benchmarks">' in render(load(wh))


def test_benchmarks_page_latest_and_history(bench_warehouse, tmp_path):
    """docs/results/benchmarks.md: the newest figures per quantity, then the history, newest first; no smoke run."""
    from eventatlas.results.report import write_pages

    wh, old, new, smoke = bench_warehouse
    pages = write_pages(tmp_path, wh)
    page = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert tmp_path / "benchmarks.md" in pages and page == benchmarks_markdown(load_benchmarks(wh))
    latest = page[page.index("## Latest"):page.index("## encode: history")]
    rows = [ln for ln in latest.splitlines() if ln.startswith("| encode")]
    assert rows == ["| encode | fp32 | s ↓ | eventatlas: 2 | sentence-transformers: 5 | **2.5×** | "
                    f"{rows[0].split(' | ')[6]} | {rows[0].split(' | ')[7]} | 0.1.0+gbbbb |",
                    "| encode | fp32 | sentences/s ↑ | eventatlas: 300 | sentence-transformers: 250 | **1.2×** | "
                    f"{rows[1].split(' | ')[6]} | {rows[1].split(' | ')[7]} | 0.1.0+gbbbb |"]
    history = page[page.index("## encode: history"):]
    versions = [ln.rsplit(" | ", 1)[1].rstrip(" |") for ln in history.splitlines() if ln.startswith("| 20")]
    assert versions == ["0.1.0+gbbbb"] * 2 + ["0.1.0+gaaaa"] * 2
    assert "0.8×" in history and "**" not in history.split("0.1.0+gaaaa")[0].split("\n")[-1]  # 0.8: not better
    assert "gcccc" not in page  # the smoke run
    assert "make bench" in benchmarks_markdown([])
