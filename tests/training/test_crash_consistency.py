"""Crash consistency as a property: an ingest, a restore, a training checkpoint and a publish killed at
every step boundary (``EVENTATLAS_FAULT_AT=<step>``: the process ends there with os._exit, as kill -9
would) leave either the old version or the new one complete, the dataset listed, and nothing stray
once the next run has started. The kill happens in a forked child (imports shared, milliseconds)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.data.ingest import ingest, list_ingested, list_versions, restore_version
from eventatlas.io import fingerprint_paths

S = config.samples_dir()
INGEST_STEPS = ["read", "keep_version", "tables", "manifest", "switch", "switched", "done"]


def _in_child(step: str, fn) -> int:
    """Run ``fn`` in a forked child with the fault set at ``step``; its exit status (137 = killed there)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["EVENTATLAS_FAULT_AT"] = step
        try:
            fn()
        except BaseException:  # noqa: BLE001
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _stray(root: Path) -> list[str]:
    """Anything a finished write never leaves: temp files, staging or partial directories."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith((".tmp", ".partial", ".old")) or p.name == ".staging")


def _state(ddir: Path) -> tuple[str, dict]:
    """(fingerprint, rows) of a complete version: every table the manifest counts has that many rows."""
    man = json.loads((ddir / "manifest.json").read_text())
    for t, n in man["rows"].items():
        assert pq.read_metadata(ddir / f"{t}.parquet").num_rows == n, (t, n)
    return man["fingerprint"], man["rows"]


def _second_input(tmp_path: Path) -> Path:
    """The MAVEN sample plus one more document: another fingerprint, more rows (no shrink)."""
    d = tmp_path / "v2"
    shutil.copytree(S / "maven", d)
    first = json.loads((d / "train.jsonl").read_text().splitlines()[0])
    first["id"] = "another-document"
    with open(d / "train.jsonl", "a") as f:
        f.write(json.dumps(first) + "\n")
    return d


@pytest.mark.parametrize("step", INGEST_STEPS)
def test_ingest_killed_at_every_step_keeps_old_or_new_and_leaves_nothing(eventatlas_env, tmp_path, step):
    root = config.datasets_dir()
    v1 = ingest("maven", S / "maven", dataset="mv", progress=False)
    v2_in = _second_input(tmp_path)
    assert _in_child(step, lambda: ingest("maven", v2_in, dataset="mv", progress=False)) == 137
    fp, _ = _state(root / "mv")  # complete, whichever it is: the old one up to the switch, the new one after
    assert fp == (v1["fingerprint"] if step in ("read", "keep_version", "tables", "manifest", "switch") else
                  fingerprint_paths([v2_in]))
    assert [m["dataset"] for m in list_ingested()] == ["mv"]  # never vanishes from `datasets`
    v2 = ingest("maven", v2_in, dataset="mv", progress=False)  # the next run cleans what the dead one left
    assert _state(root / "mv")[0] == v2["fingerprint"]
    assert _stray(root) == []


@pytest.mark.parametrize("step", ["read", "tables", "manifest", "switch", "done"])  # no old version: no exchange
def test_ingest_of_a_new_name_killed_leaves_no_dataset_or_a_complete_one(eventatlas_env, step):
    root = config.datasets_dir()
    assert _in_child(step, lambda: ingest("maven", S / "maven", dataset="fresh", progress=False)) == 137
    assert (root / "fresh").exists() == (step == "done")
    if step == "done":
        _state(root / "fresh")
    ingest("maven", S / "maven", dataset="other", progress=False)  # any later ingest sweeps dead writers' staging
    assert _stray(root) == []
    assert not [p for p in root.glob("*") if p.is_dir() and not p.name.startswith(".") and not (p / "manifest.json").exists()]
    ingest("maven", S / "maven", dataset="fresh", progress=False)
    assert _stray(root) == [] and [m["dataset"] for m in list_ingested()] == ["fresh", "other"]


@pytest.mark.parametrize("step", ["keep_version", "restore_staged", "switch", "switched"])
def test_restore_killed_at_every_step(eventatlas_env, tmp_path, step):
    root = config.datasets_dir()
    v1 = ingest("maven", S / "maven", dataset="mv", progress=False)
    time.sleep(1.1)  # kept versions are named by their ingest second
    v2 = ingest("maven", _second_input(tmp_path), dataset="mv", progress=False)
    (old,) = list_versions("mv")
    assert _in_child(step, lambda: restore_version("mv", old["version"])) == 137
    assert _state(root / "mv")[0] in (v1["fingerprint"], v2["fingerprint"])
    assert [m["dataset"] for m in list_ingested()] == ["mv"]
    restore_version("mv", old["version"])
    assert _state(root / "mv")[0] == v1["fingerprint"]
    assert _stray(root) == []


def test_non_atomic_switch_killed_between_its_renames_is_rolled_forward(eventatlas_env, tmp_path, monkeypatch):
    """Where no atomic exchange exists the switch is two renames; a kill between them is repaired."""
    import eventatlas.io as io

    root = config.datasets_dir()
    ingest("maven", S / "maven", dataset="mv", progress=False)
    v2_in = _second_input(tmp_path)
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)
    assert _in_child("switch_half", lambda: ingest("maven", v2_in, dataset="mv", progress=False)) == 137
    assert not (root / "mv").exists()  # the window the fallback has
    v2 = ingest("maven", v2_in, dataset="mv", progress=False)  # rolls the complete new version forward first
    assert _state(root / "mv")[0] == v2["fingerprint"] and _stray(root) == []


HERE = Path(__file__).resolve().parent


@pytest.mark.timeout(400)
@pytest.mark.parametrize("step", ["checkpoint_state:2", "checkpoint_renamed:2"])
def test_training_killed_while_checkpointing_resumes_and_leaves_no_temp_directory(tmp_path, step):
    from support.tiny_models import tiny_bert
    from support.train_worker import SENTS

    model = tiny_bert(tmp_path / "m", [s for s, _, _ in SENTS])
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1]), "EVENTATLAS_FAULT_AT": step}
    worker = [sys.executable, str(HERE.parent / "support" / "train_worker.py"), str(model), str(out), "--epochs", "1"]
    r = subprocess.run(worker, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 137, r.stderr[-2000:]
    ck = out / "checkpoints"
    latest = json.loads((ck / "latest.json").read_text())
    assert latest["step"] == 2 and (ck / latest["checkpoint"]).is_dir()  # the pointer names a whole checkpoint
    assert bool(list(ck.glob(".step_*.tmp"))) == step.startswith("checkpoint_state")
    env.pop("EVENTATLAS_FAULT_AT")
    r = subprocess.run(worker + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list(ck.glob(".*.tmp")) == [] and (out / "final.pt").exists()


def test_publish_killed_after_the_commit_lands_the_run_exactly_once(eventatlas_env, monkeypatch):
    from eventatlas.store.publishing import pending_runs, publish_records, queue_run
    from eventatlas.store.warehouse import Warehouse
    from eventatlas.tracking.records import finish_record, new_record, write_metrics, write_record

    wh = Warehouse()
    wh.migrate()
    rec = new_record("r1", flow="t", task="induction", method="quick", seed=0, device="cpu")
    write_metrics(rec, [{"task": "induction", "dataset": "d", "method": "quick", "representation": "trigger",
                         "clustering": "agglomerative", "metric": "ari", "value": 0.5, "seed": 0}], eventatlas_env / "r1")
    path = write_record(eventatlas_env / "r1", finish_record(rec))
    queue_run(wh.path, path, "r1", "busy")
    for step in ("publish_committed", "publish_dequeued"):
        assert _in_child(step, lambda: publish_records([])) == 137
        _, rows = wh.query_rows("SELECT count(*) FROM runs WHERE run_id = 'r1'")
        assert rows == [(1,)]  # committed whole before the kill
    assert pending_runs(wh.path) == [] or publish_records([]).from_queue == ["r1"]
    _, rows = wh.query_rows("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM metrics)")
    assert rows == [(1, 1)] and pending_runs(wh.path) == []


@pytest.mark.parametrize("step", ["wiki_publish", "switch:2", "switched:2"])  # the 1st switch writes the build dir
def test_wiki_build_publish_killed_leaves_the_previous_or_the_new_build(tmp_path, step):
    # the builder's publish used to unlink the manifest and copy tables one by one: a kill in between left
    # a dataset without a manifest (or with tables of two builds). Now it is one directory switch
    from eventatlas.wiki.build import PUBLISHED, build
    from support.wiki_world.world import LANGS, WORLD_PARAMS, build_world

    out = tmp_path / "datasets" / "wikigrounding"
    w = build_world()
    build(w.backend(), out, languages=LANGS, params=WORLD_PARAMS, build_id="v1")
    assert _in_child(step, lambda: build(w.backend(), out, languages=("en", "de"), params=WORLD_PARAMS,
                                         build_id="v2")) == 137
    man = json.loads((out / "manifest.json").read_text())
    want = "v2" if step.startswith("switched") else "v1"  # killed after the exchange: the new version is complete
    assert man["build_id"] == want
    for name in PUBLISHED:  # every table is the manifest's build's, none of the other one
        assert pq.read_table(out / f"{name}.parquet").equals(pq.read_table(out / "builds" / want / f"{name}.parquet")), name
    assert (out / "builds" / "v1" / "manifest.json").exists()  # the build history survives the switch
    build(w.backend(), out, languages=LANGS, params=WORLD_PARAMS, build_id="v3")
    assert json.loads((out / "manifest.json").read_text())["build_id"] == "v3"
    assert {p.name for p in (out / "builds").iterdir()} >= {"v1", "v3"}
    assert _stray(tmp_path) == []


def test_atomic_write_gives_a_new_file_the_usual_mode_and_keeps_an_existing_files(tmp_path):
    """mkstemp's temp file is private (0o600); the renamed result must not be: a report or page written
    atomically is as readable as one written by open() (0o666 less the umask), and a rewrite keeps the mode
    its owner gave the file."""
    from eventatlas.io import atomic_write_text

    mask = os.umask(0o022)
    os.umask(mask)
    p = tmp_path / "report.html"
    atomic_write_text(p, "<p>one</p>")
    assert (p.stat().st_mode & 0o777) == 0o666 & ~mask != 0o600
    p.chmod(0o640)
    atomic_write_text(p, "<p>two</p>")
    assert (p.stat().st_mode & 0o777) == 0o640 and p.read_text() == "<p>two</p>"
    assert [q.name for q in tmp_path.iterdir()] == ["report.html"]
