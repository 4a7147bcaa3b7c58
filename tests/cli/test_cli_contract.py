"""The CLI's contract for bad calls: every usage error and unknown name exits 2 with one ``error:`` line
(a "did you mean" for commands, methods, datasets and readers), before Prefect or torch is imported;
help text keeps its literal brackets; `eventatlas methods` shows types with their allowed values."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# runs the real app in a fresh interpreter and says, after it exits, whether Prefect / torch were imported
PROBE = textwrap.dedent("""
    import sys
    from eventatlas.cli import app
    code = 0
    try:
        app(sys.argv[1:], prog_name="eventatlas")
    except SystemExit as e:
        code = e.code
    print("MODULES", "prefect" in sys.modules, "torch" in sys.modules, file=sys.stderr)
    sys.exit(code)
""")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A data root with one ingested dataset (`ontoevent`: only its manifest) and one run (`run-a`)."""
    root = tmp_path_factory.mktemp("contract")
    (root / "data" / "datasets" / "ontoevent").mkdir(parents=True)
    (root / "data" / "datasets" / "ontoevent" / "manifest.json").write_text(json.dumps({"dataset": "ontoevent"}))
    (root / "data" / "runs" / "run-a").mkdir(parents=True)
    (root / "data" / "runs" / "run-a" / "run.json").write_text("{}")
    return root


def _run(root: Path, *args: str) -> tuple[int, str, bool, bool]:
    env = {**os.environ, "EVENTATLAS_DATA": str(root / "data"), "EVENTATLAS_WAREHOUSE": str(root / "wh.duckdb"),
           "PREFECT_HOME": str(root / "prefect"), "PYTHONPATH": str(REPO)}
    env.pop("PREFECT_API_URL", None)
    r = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    lines = r.stderr.strip().splitlines()
    flags = lines[-1].split()  # MODULES <prefect imported> <torch imported>
    prefect, torch = flags[1] == "True", flags[2] == "True"
    return r.returncode, "\n".join(lines[:-1]), prefect, torch


CONTRACT = [  # (args, message parts); every row: exit 2, one error line, neither Prefect nor torch imported
    (["trian"], ["No such command 'trian'", "Did you mean 'train'?"]),
    (["--bogus"], ["No such option: --bogus"]),
    (["leaderboard", "--bogus"], ["No such option: --bogus", "eventatlas leaderboard --help"]),
    (["train", "untuned"], ["Missing argument 'dataset'"]),
    (["train", "untuned", "ontoevent", "--seed", "abc"], ["Invalid value for '--seed'"]),
    (["train", "untunde", "ontoevent"], ["unknown method 'untunde' (did you mean 'untuned'?)"]),
    (["train", "untuned", "ontoevnet"], ["dataset 'ontoevnet' is not ingested (did you mean 'ontoevent'?)"]),
    (["train-all", "--methods", "untunde"], ["unknown method 'untunde' (did you mean 'untuned'?)"]),
    (["train-all", "--datasets", "ontoevnet"], ["dataset 'ontoevnet' is not ingested (did you mean 'ontoevent'?)"]),
    (["train-all", "--seeds", "0,y"], ["--seeds: 'y' is not an integer"]),
    (["train-all", "--params", "{bad"], ["bad --params: "]),
    (["experiment", "run", "untuned_baselines", "--seeds", "x"], ["--seeds: 'x' is not an integer"]),
    (["ingest", "mavne", "--path", "x"], ["unknown reader 'mavne' (did you mean 'maven'?)"]),
    (["embed", "ontoevnet"], ["dataset 'ontoevnet' is not ingested (did you mean 'ontoevent'?)"]),
    (["cluster", "ontoevent", "--algorithm", "manfold"], ["unknown clustering algorithm 'manfold' (did you mean "
                                                          "'manifold'?)"]),
    (["ground", "--dataset", "ontoevent", "--run", "run-b", "--text", "a [b] c"],
     ["unknown run 'run-b' (did you mean 'run-a'?)"]),
    (["ensemble", "run-a", "run-c"], ["unknown run 'run-c' (did you mean 'run-a'?)"]),
    # no warehouse (the user's is absent, so is the demo's): how to get one
    (["leaderboard"], ["no warehouse at", "`make demo` makes one on the samples"]),
    (["leaderboard", "--wide", "--bogus"], ["No such option: --bogus"]),
    (["--warehouse", "tests", "sql", "SELECT 1"], ["--warehouse tests: a directory"]),
]


@pytest.mark.parametrize("args, parts", CONTRACT, ids=[" ".join(a) for a, _ in CONTRACT])
def test_bad_call_exits_2_with_one_line_before_prefect_and_torch(root, args, parts):
    code, err, prefect, torch = _run(root, *args)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for p in parts:
        assert p in err, err
    assert not prefect and not torch, (prefect, torch)


@pytest.mark.parametrize("command, literal", [("search", "[brackets]"), ("ground", "[brackets], e.g. \"Police "
                                                                                  "[arrested] him.\"")])
def test_help_keeps_literal_brackets(command, literal):
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", command, "--help"], cwd=REPO, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert literal in " ".join(r.stdout.split()), r.stdout


def test_methods_shows_types_with_allowed_values_and_defaults():
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "methods"], cwd=REPO, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert ("k_seen: int | None = None  (most frequent types held out as seen (default: the method's; 0: none, "
            "e.g. frames as clusters))") in lines
    assert "encoder.precision: 'auto' | 'fp32' | 'bf16' = 'auto'" in lines  # a nested config's key, Literal choices
    assert any(ln.startswith("representations: list of ('sentence' | 'trigger' | 'mask' | 'mix' | 'window4') | None")
               for ln in lines)
    assert not any("typing." in ln or "Optional[" in ln or "Literal[" in ln or "Union[" in ln for ln in lines)


def test_did_you_mean():
    from eventatlas.cli.base import did_you_mean

    assert did_you_mean("untunde", ["untuned", "emr"]) == " (did you mean 'untuned'?)"
    assert did_you_mean("zzz", ["untuned", "emr"]) == ""


def test_failed_ingest_is_refused_without_torch_or_prefect(root, tmp_path):
    """Bad input to a real ingest: one line, exit 2, its failed run record written, and neither torch (the
    record's device is described without it) nor Prefect (no API configured) imported."""
    empty = tmp_path / "train.jsonl"
    empty.write_bytes(b"")
    code, err, prefect, torch = _run(root, "ingest", "maven", "--path", str(empty), "--dataset", "mv")
    assert code == 2 and err.startswith(f"error: {empty}:-: this does not look like maven input"), err
    assert not prefect and not torch
    (rec,) = (root / "data" / "runs").glob("ingest-mv-*/run.json")
    assert json.loads(rec.read_text())["run"]["status"] == "failed"
