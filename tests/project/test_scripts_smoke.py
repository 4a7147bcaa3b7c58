"""Every script under benchmarks/ and scripts/ runs: each has a ``--smoke`` mode (tiny input, seconds) and
this test runs it. Scripts are found by globbing, so a new script is covered without a new test, and one
without a smoke mode fails here. Helper modules (names starting with ``_``) are not scripts.

Python scripts run in this process (``runpy``: torch and the other imports are paid once for all of them)
with a temporary data root, warehouse, cache and TMPDIR; the environment, ``sys.argv``, ``sys.path`` and
torch's thread count are restored after each. Shell scripts run as subprocesses. A smoke run must write
nothing into the repository, and a benchmark's smoke run records and publishes its run to the temporary
warehouse only.
"""
from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("benchmarks", "scripts")
SCRIPTS = sorted(p for d in FOLDERS for p in (REPO / d).iterdir()
                 if p.suffix in (".py", ".sh") and not p.name.startswith("_"))
def _param(p: Path):
    return pytest.param(p, id=p.relative_to(REPO).as_posix())


def _repo_files() -> set[str]:
    """Every file git reports in the work tree (tracked changes, untracked and ignored ones)."""
    out = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--ignored", "--untracked-files=all"],
                         capture_output=True, text=True, check=True).stdout
    return {line[3:] for line in out.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line}


def test_every_script_is_found():
    names = {p.relative_to(REPO).as_posix() for p in SCRIPTS}
    assert {"benchmarks/bench_encode.py", "scripts/serve.sh", "scripts/mutation.py"} <= names
    assert not any(Path(n).name.startswith("_") for n in names)


@pytest.mark.parametrize("script", [_param(p) for p in SCRIPTS])
def test_script_smoke_mode(script: Path, tmp_path, monkeypatch, capsys):
    rel = script.relative_to(REPO).as_posix()
    src = script.read_text(encoding="utf-8")
    if script.suffix == ".py":
        assert re.search(r"""add_argument\(\s*["']--smoke["']""", src) or "benchmarking.parse_args(" in src, (
            f"{rel} has no --smoke in its argparse: every script needs a smoke mode (tiny input, seconds)")
    else:
        assert "--smoke" in src, f"{rel} handles no --smoke argument"
    env = {"EVENTATLAS_DATA": tmp_path / "data", "EVENTATLAS_WAREHOUSE": tmp_path / "wh.duckdb",
           "EVENTATLAS_CACHE": tmp_path / "cache", "EVENTATLAS_SHARED_DATA": tmp_path / "no-shared-data",
           "PREFECT_HOME": tmp_path / "prefect", "TMPDIR": tmp_path / "tmp"}
    (tmp_path / "tmp").mkdir()
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))  # set here so that monkeypatch restores what a script changes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # TMPDIR is read once per process
    before = _repo_files()
    if script.suffix == ".sh":
        r = subprocess.run(["bash", str(script), "--smoke"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
        assert r.returncode == 0, f"{rel} --smoke failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        out = r.stdout
    else:
        out = _run_in_process(script, monkeypatch, capsys)
    assert _repo_files() - before == set(), f"{rel} --smoke wrote into the repository"
    if script.parent.name == "benchmarks" and script.name.startswith("bench_"):
        m = re.search(r"^published: (\S+) -> (.+)$", out, re.M)
        assert m, f"{rel} --smoke published no benchmark run:\n{out[-2000:]}"
        assert Path(m.group(2)).resolve().is_relative_to(tmp_path.resolve())  # never the user's warehouse
        from eventatlas.store.warehouse import Warehouse

        _, rows = Warehouse(m.group(2)).query_rows(
            "SELECT r.task, b.benchmark, b.smoke, b.ours, b.cpu_model FROM benchmarks b JOIN runs r USING (run_id) "
            "WHERE run_id = ?", [m.group(1)])
        assert rows and all(r[0] == "benchmark" and r[2] is True and r[3] is not None and r[4] for r in rows), rows


def _run_in_process(script: Path, monkeypatch, capsys) -> str:
    import torch

    threads = torch.get_num_threads()
    monkeypatch.setattr(sys, "argv", [str(script), "--smoke"])
    monkeypatch.syspath_prepend(str(script.parent))  # as `python script.py` does (scripts import _smoke)
    monkeypatch.syspath_prepend(str(REPO))
    torch.set_num_threads(1)  # a smoke run times nothing; one thread avoids oversubscribing shared cores
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            out = capsys.readouterr()
            raise AssertionError(f"{script.name} --smoke exited with {e.code}:\n{out.out[-3000:]}\n{out.err[-3000:]}")
    finally:
        torch.set_num_threads(threads)
    return capsys.readouterr().out
