"""An experiment YAML is refused before anything runs when it names a path instead of a dataset or run,
repeats a key, uses anchors or aliases, is not UTF-8, nests without end, or asks for seeds or cells beyond
the bounds: one line naming the file (and key or line), exit 2, nothing written under the data root. The
cell lock that keeps two identical runs from training one cell twice does not outlive a killed holder."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.experiments import ExperimentError, load
from eventatlas.experiments.spec import MAX_BYTES, MAX_CELL_RUNS, MAX_CELLS, MAX_DEPTH, parse
from eventatlas.tracking.runinfo import MAX_SEEDS

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "experiments" / "untuned_baselines.yaml"
runner = CliRunner()


def _cli(*args):
    from eventatlas.cli import app

    r = runner.invoke(app, list(args))
    return r.exit_code, r.output.strip()


def _text(tmp_path, text: str | bytes, name: str = "probe") -> Path:
    """``text`` as the declaration file ``<name>.yaml``."""
    p = tmp_path / f"{name}.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _base(name: str = "probe") -> str:
    """A shipped declaration's text, renamed (a declaration's name is its file's)."""
    return BASE.read_text(encoding="utf-8").replace("name: untuned_baselines", f"name: {name}")


def _refused(p: Path, *expected: str, quick: bool = False) -> str:
    """``experiment show`` refuses ``p`` in one line naming it, exit 2; nothing lands under the data root."""
    code, out = _cli("experiment", "show", str(p), *(["--quick"] if quick else []))
    assert code == 2, out
    assert out.count("\n") == 0 and out.startswith(f"error: {p}"), out
    for e in expected:
        assert e in out, out
    assert not config.data_root().exists()
    return out


# ----------------------------------------------------------------------------- names
@pytest.mark.parametrize("name", ["../../other/datasets/victim", "../../../x", "/abs/victim", "a/b", ".hidden"])
def test_dataset_name_that_is_a_path_is_refused(tmp_path, eventatlas_env, name):
    data = yaml.safe_load(_base())
    data["datasets"]["onto"]["name"] = name
    p = _text(tmp_path, yaml.safe_dump(data))
    _refused(p, f"datasets.onto.name {name!r}")
    _refused(p, f"datasets.onto.name {name!r}", quick=True)  # the quick override keeps the name


def test_another_data_roots_dataset_is_not_read(tmp_path, eventatlas_env):
    """The reported case: a dataset of another data root, reachable by '..', is refused, not trained on."""
    victim = tmp_path / "other" / "datasets" / "victim"
    victim.mkdir(parents=True)
    (victim / "manifest.json").write_text("{}")
    data = yaml.safe_load(_base())
    data["datasets"]["onto"]["name"] = "../../other/datasets/victim"
    p = _text(tmp_path, yaml.safe_dump(data))
    code, out = _cli("experiment", "run", str(p))
    assert code == 2 and out.count("\n") == 0 and "holds a path separator" in out and str(p) in out
    assert not config.runs_dir().exists()


# ----------------------------------------------------------------------------- the YAML itself
def test_duplicate_key_is_refused_naming_the_line(tmp_path, eventatlas_env):
    text = _base().replace("seeds: [0]", "seeds: [0]\nseeds: [1]")
    line = text.splitlines().index("seeds: [1]") + 1
    _refused(_text(tmp_path, text), f":{line}: key 'seeds' repeats (first on line {line - 1})")
    nested = _base().replace("onto: {reader: ontoevent}", "onto: {reader: ontoevent, reader: maven}")
    _refused(_text(tmp_path, nested), "key 'reader' repeats")


def test_anchors_aliases_and_merge_keys_are_refused(tmp_path, eventatlas_env):
    # a few lines that would expand to 10**9 strings under an alias-following loader
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
    t0 = time.perf_counter()
    _refused(_text(tmp_path, laughs), ":1: anchors and aliases (&name, *name) are not allowed")
    assert time.perf_counter() - t0 < 5
    alias = _base().replace("seeds: [0]", "seeds: [0]\ndescription: *d").replace("title:", "title: &d")
    _refused(_text(tmp_path, alias), "anchors and aliases")
    merge = _base().replace("goal:\n", "goal:\n  <<: {within: 3.0}\n")
    _refused(_text(tmp_path, merge), "merge keys (<<) are not allowed")


def test_invalid_utf8_is_refused(tmp_path, eventatlas_env):
    _refused(_text(tmp_path, _base().encode() + b"\n# \xff\xfe\n"), "not UTF-8 text")


def test_deep_nesting_is_refused(tmp_path, eventatlas_env):
    deep = _base().replace("seeds: [0]", "seeds: " + "[" * 50_000 + "]" * 50_000)
    line = deep.splitlines().index(next(x for x in deep.splitlines() if x.startswith("seeds:"))) + 1
    _refused(_text(tmp_path, deep), f":{line}: nested deeper than {MAX_DEPTH} levels")
    block = "x:\n" + "".join("  " * i + "- \n" for i in range(1, 200))
    _refused(_text(tmp_path, block), "nested deeper than")


def test_oversized_file_is_refused(tmp_path, eventatlas_env):
    _refused(_text(tmp_path, _base() + "#" * MAX_BYTES + "\n"), f"at most {MAX_BYTES}")


# ----------------------------------------------------------------------------- seeds and sizes
@pytest.mark.parametrize("seeds,expected", [
    ("[" + "9" * 5000 + "]", "an integer of 5000 characters"),
    ("[" + "9" * 23 + "]", "99999999999999999999999 is not a seed (an integer 0 <= seed < 2**31)"),
    (f"[{2**31}]", f"{2**31} is not a seed"),
    ("[-1]", "-1 is not a seed"),
    ("[1, 2, 1]", "a seed repeats"),
    ("[]", "no seed given"),
    ("[" + ", ".join(map(str, range(MAX_SEEDS + 1))) + "]", f"{MAX_SEEDS + 1} seeds, at most {MAX_SEEDS}"),
])
def test_seeds_out_of_bounds_are_refused(tmp_path, eventatlas_env, seeds, expected):
    _refused(_text(tmp_path, _base().replace("seeds: [0]", f"seeds: {seeds}")), expected)


def test_largest_seed_is_accepted(tmp_path):
    assert load(str(_text(tmp_path, _base().replace("seeds: [0]", f"seeds: [0, {2**31 - 1}]")))).seeds == [0, 2**31 - 1]


def test_cells_and_cell_runs_are_bounded(tmp_path):
    data = yaml.safe_load(_base())
    data["cells"] = [{"name": f"c{i}", "method": "untuned", "dataset": "onto"} for i in range(MAX_CELLS + 1)]
    with pytest.raises(ExperimentError, match=rf"{MAX_CELLS + 1} cells, at most {MAX_CELLS}"):
        parse(data, tmp_path / "probe.yaml")
    n = MAX_CELL_RUNS // MAX_SEEDS + 1
    data["cells"] = data["cells"][:n]
    data["seeds"] = list(range(MAX_SEEDS))
    with pytest.raises(ExperimentError, match=rf"{n} cells x {MAX_SEEDS} seeds = {n * MAX_SEEDS} cell runs, at most "
                                              rf"{MAX_CELL_RUNS}"):
        parse(data, tmp_path / "probe.yaml")


@pytest.mark.parametrize("given,expected", [
    (["9" * 5000], "--seeds: 99999999999999999999... (5000 characters) is not a seed"),
    ([str(2**31)], f"--seeds: {2**31} is not a seed"),
    ([",".join(map(str, range(100_000)))], f"--seeds: 100000 seeds, at most {MAX_SEEDS}"),
    (["1,2", "1"], "--seeds: a seed repeats"),
    (["0,y"], "--seeds: 'y' is not an integer"),
])
def test_seeds_option_is_bounded(given, expected):
    from eventatlas.cli.base import split_seeds

    t0 = time.perf_counter()
    with pytest.raises(ValueError) as e:
        split_seeds(given)
    assert str(e.value).startswith(expected) and time.perf_counter() - t0 < 1
    assert split_seeds(["0", f"3,{2**31 - 1}"]) == [0, 3, 2**31 - 1]


def test_seeds_option_is_refused_before_anything_runs(eventatlas_env):
    code, out = _cli("experiment", "run", "untuned_baselines", "--quick", "--seeds", "9" * 23)
    assert code == 2 and out == "error: --seeds: 99999999999999999999999 is not a seed (an integer 0 <= seed < 2**31)"
    assert not config.data_root().exists()


@pytest.mark.parametrize("command", [["train", "untuned", "onto"], ["cluster", "onto"]])
def test_seed_option_of_one_run_takes_the_same_bound(eventatlas_env, command):
    """A seed the warehouse cannot hold (INTEGER) is refused by ``--seed`` too, before the dataset is looked
    up: it used to run, then fail at publish."""
    code, out = _cli(*command, "--seed", str(2**31))
    assert code == 2 and f"{2**31} is not a seed (an integer 0 <= seed < 2**31)" in out and "--seed" in out
    assert not config.data_root().exists()


# ----------------------------------------------------------------------------- run: references
@pytest.mark.parametrize("ref,why", [
    ("run:../../x", "'../../x' holds a path separator"),
    ("run:/abs", "'/abs' holds a path separator"),
    ("run:untuned-*", "'untuned-*' holds '*'"),
    ("run:a[0]", "'a[0]' holds '[]'"),
    ("run:a:b:c", "not run:<run id>, run:<method>:<dataset>:latest"),
    ("run:untuned:../x:latest", "'../x' holds a path separator"),
    ("run:abc@../enc", "'../enc' holds a path separator"),
    ("run:", "no run id after 'run:'"),
])
def test_malformed_run_reference_is_refused_at_load(tmp_path, eventatlas_env, ref, why):
    data = yaml.safe_load(_base())
    data["params"]["untuned"]["model_id"] = ref
    _refused(_text(tmp_path, yaml.safe_dump(data)), f"params.untuned.model_id {ref!r}: {why}")


def test_missing_run_reference_is_refused_before_any_run(tmp_path, eventatlas_env):
    """A well-formed reference to a run that does not exist: refused before any cell runs, so no run
    directory, no ingest and no warehouse row is written (it used to fail inside the run, after both)."""
    from eventatlas.experiments.run import run_experiment

    data = yaml.safe_load(_base())
    data["quick"]["params"]["untuned"]["model_id"] = "run:untuned-nope"
    p = _text(tmp_path, yaml.safe_dump(data))
    code, out = _cli("experiment", "run", str(p), "--quick")
    assert code == 2 and out.count("\n") == 0, out
    assert out.startswith(f"error: {p}: params.untuned.model_id: run:untuned-nope: no saved model"), out
    code, out = _cli("experiment", "run", "untuned_baselines", "--quick", "--params",
                     '{"untuned": {"model_id": "run:untuned:onto:latest"}}')
    assert code == 2 and "--params.untuned.model_id: run:untuned:onto:latest: no saved untuned model" in out, out
    ran: list = []
    with pytest.raises(ExperimentError, match="no saved model"):  # the flows' path: the same check, first
        run_experiment(load(str(p), quick=True), execute=ran.append, publish=ran.append, say=ran.append)
    assert ran == []
    assert not config.runs_dir().exists() and not config.datasets_dir().exists()
    assert not Path(os.environ["EVENTATLAS_WAREHOUSE"]).exists()


# ----------------------------------------------------------------------------- the cell lock
def test_lock_of_a_killed_holder_does_not_block(eventatlas_env):
    """A run killed (SIGKILL) while it holds a cell's lock: the kernel lets the lock go, the next run gets it."""
    from eventatlas.experiments.run import Lock

    code = ("import sys, time; from eventatlas.experiments.run import Lock; "
            "Lock('cells', 'probe-s0').acquire(wait=True); print('held', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout.readline().strip() == "held"
        assert Lock("cells", "probe-s0").acquire(wait=False) is False
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    mine = Lock("cells", "probe-s0")
    assert mine.acquire(wait=False) is True
    mine.release()
    with pytest.raises(ValueError, match="holds a path separator"):
        Lock("cells", "../x")


def test_dataset_another_run_ingests_is_waited_for_not_ingested_twice(tmp_path, eventatlas_env):
    import threading

    from eventatlas.data.ingest import ingest_dataset
    from eventatlas.experiments.run import Lock, dataset_input, ingest_missing

    spec = {"name": "probe", "title": "probe", "methods": ["untuned"],
            "datasets": {"hard": {"reader": "hard_similarity", "sample": True}},
            "table": {"rows": {"hard": {"dataset": "hard"}}, "columns": {"acc": {"metric": "hard_sim_acc"}}},
            "goal": {"text": "runs"}}
    exp = load(str(_text(tmp_path, yaml.safe_dump(spec))))
    other = Lock("datasets", "hard_similarity_sample")  # another run, ingesting it now
    assert other.acquire(wait=False)
    waits, said, out = threading.Event(), [], []

    def say(msg):
        said.append(msg)
        waits.set()

    t = threading.Thread(target=lambda: out.append(ingest_missing(exp, say)))
    t.start()
    try:
        assert waits.wait(20)
        assert said == ["dataset hard_similarity_sample: another run is ingesting it; waiting for it"]
        ingest_dataset("hard_similarity", str(dataset_input(exp, "hard")), dataset="hard_similarity_sample")
    finally:
        other.release()
        t.join(60)
    assert out == [[]] and len(said) == 1  # nothing ingested a second time
