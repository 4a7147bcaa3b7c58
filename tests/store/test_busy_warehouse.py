"""A warehouse another process holds (even read-only) never costs a trained run: the publish waits
(bounded, with a message), then queues the run on disk; `eventatlas publish --pending` and the next
flow's publish land it exactly once. The holder is a real second process with a DuckDB handle."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eventatlas.methods import REGISTRY
from eventatlas.store.publishing import pending_dir, pending_runs, publish_records, queue_run
from eventatlas.store.warehouse import Warehouse, WarehouseLocked
from eventatlas.tracking.records import RecordError, finish_record, new_record, write_metrics, write_record

HOLDER = textwrap.dedent(
    """
    import sys, duckdb
    con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
    con.execute("SELECT count(*) FROM runs").fetchall()
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    con.close()
    """
)


class Holder:
    """A second process with an open DuckDB handle on the warehouse until ``release()``."""

    def __init__(self, path: Path, mode: str = "ro"):
        self.p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "holding"

    def release(self) -> None:
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)

    def __enter__(self) -> "Holder":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _metric(dataset: str, value: float) -> dict:
    return {"task": "induction", "dataset": dataset, "method": "quick", "representation": "trigger",
            "clustering": "agglomerative", "metric": "ari", "value": value, "seed": 0}


def _record(root: Path, run_id: str, n_metrics: int = 2) -> Path:
    rec = new_record(run_id, flow="test", task="induction", method="quick", seed=0)
    rows = [{**_metric("d", 0.1 * i), "metric": f"m{i}"} for i in range(n_metrics)]
    write_metrics(rec, rows, root / run_id)
    return write_record(root / run_id, finish_record(rec))


def _counts(wh: Warehouse, run_id: str) -> tuple[int, int]:
    _, r = wh.query_rows("SELECT (SELECT count(*) FROM runs WHERE run_id = ?), "
                         "(SELECT count(*) FROM metrics WHERE run_id = ?)", [run_id, run_id])
    return r[0]


@pytest.fixture
def wh(eventatlas_env, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_LOCK_TIMEOUT", "1")
    w = Warehouse()
    w.migrate()
    return w


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_busy_warehouse_queues_the_run_and_pending_publishes_it_once(wh, eventatlas_env, mode):
    rec = _record(eventatlas_env / "runs", "r1", n_metrics=3)
    said: list[str] = []
    with Holder(wh.path, mode):
        out = publish_records([rec], warn=said.append)
        assert out.queued == ["r1"] and not out.published
        assert "is busy (held by pid" in said[0] and "waiting up to 1s" in said[0]
        assert "still busy: 1 run(s) queued" in said[-1] and "eventatlas publish --pending" in said[-1]
        (entry,) = pending_runs(wh.path)
        assert entry["run_id"] == "r1" and entry["record"] == str(rec.resolve())
        # queued again while still busy: still one entry
        publish_records([rec], warn=said.append)
        assert len(pending_runs(wh.path)) == 1
    assert _counts(wh, "r1") == (0, 0)  # nothing half-written while queued
    out = publish_records([])  # eventatlas publish --pending
    assert out.from_queue == ["r1"] and out.published == ["r1"] and out.metric_rows == 3
    assert _counts(wh, "r1") == (1, 3) and not pending_runs(wh.path)
    assert publish_records([]).published == []  # the queue is empty now: nothing lands twice
    publish_records([rec])  # publishing the same run again replaces it
    assert _counts(wh, "r1") == (1, 3)


def test_next_publish_lands_queued_runs_first(wh, eventatlas_env):
    a, b = _record(eventatlas_env / "runs", "a"), _record(eventatlas_env / "runs", "b")
    with Holder(wh.path):
        assert publish_records([a], warn=lambda m: None).queued == ["a"]
    out = publish_records([b])  # the next flow's publish
    assert out.published == ["a", "b"] and out.from_queue == ["a"]
    assert _counts(wh, "a") == (1, 2) and _counts(wh, "b") == (1, 2)


def test_queued_run_whose_record_went_away_is_set_aside(wh, eventatlas_env):
    a = _record(eventatlas_env / "runs", "gone")
    with Holder(wh.path):
        publish_records([a], warn=lambda m: None)
    a.unlink()
    said: list[str] = []
    out = publish_records([], warn=said.append)
    assert out.published == [] and not pending_runs(wh.path)
    assert (pending_dir(wh.path) / "gone.json.bad").exists() and "run record not found" in said[0]


def test_cli_publish_waits_queues_then_pending_lands(wh, eventatlas_env):
    rec = _record(eventatlas_env / "runs", "cli1")
    env = {**os.environ, "EVENTATLAS_LOCK_TIMEOUT": "1", "EVENTATLAS_PREFECT": "never"}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "eventatlas.cli"]
    with Holder(wh.path):
        r = subprocess.run([*cmd, "publish", str(rec)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "is busy (held by pid" in r.stderr and "1 run(s) stay queued" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([*cmd, "publish", "--pending"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "published 1 run records" in r.stdout and "1 of 1 queued" in r.stdout
    assert _counts(wh, "cli1") == (1, 2)
    r = subprocess.run([*cmd, "publish"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--pending" in r.stderr


def quick(ctx):
    """A method that 'trains' instantly: one metric row."""
    from eventatlas.methods.base import MethodResult

    return MethodResult(metrics=[{**_metric(ctx.dataset_dir.name, 0.5), "seed": ctx.seed}])


def test_train_all_with_a_read_only_session_open_loses_no_run(eventatlas_env, monkeypatch):
    """The flow (through Prefect) trains, finds the warehouse held read-only by another process,
    queues the run and succeeds; the next flow's publish lands it exactly once."""
    from prefect.testing.utilities import prefect_test_harness

    from eventatlas.data.ingest import ingest
    from eventatlas.methods import MethodSpec

    monkeypatch.setenv("PREFECT_HOME", str(eventatlas_env / "prefect"))
    monkeypatch.setenv("EVENTATLAS_LOCK_TIMEOUT", "1")
    monkeypatch.setitem(REGISTRY, "quick", MethodSpec(
        name="quick", config="eventatlas.methods.spec:MethodConfig", run="test_busy_warehouse:quick",
        applies_to=frozenset({"typed_mentions"}), tasks=("induction",)))
    sample = Path(__file__).resolve().parents[2] / "datasets" / "samples" / "maven" / "train.jsonl"
    ingest("maven", sample, dataset="m")
    wh = Warehouse()
    wh.migrate()
    with prefect_test_harness(server_startup_timeout=120):
        from flows.publish import publish
        from flows.train_all import train_all

        with Holder(wh.path):
            out = train_all(datasets=["m"], methods=["quick"])
        (run_id,) = out["queued"]
        assert out["runs"] == 1 and not out["failed"]
        assert _counts(wh, run_id) == (0, 0) and len(pending_runs(wh.path)) == 1
        landed = publish([])  # what `eventatlas publish --pending` runs through Prefect
        assert landed["from_queue"] == [run_id]
        publish([])
    assert _counts(wh, run_id) == (1, 1) and not pending_runs(wh.path)


def test_queue_order_entries_and_what_is_not_published(wh, eventatlas_env):
    from eventatlas.store.publishing import queue_run

    runs = eventatlas_env / "runs"
    a, b, c = (_record(runs, n) for n in ("qa", "qb", "qc"))
    queue_run(wh.path, b, "qb", "busy")
    queue_run(wh.path, a, "qa", "busy")
    (pending_dir(wh.path) / "junk.json").write_text("{not json", encoding="utf-8")  # unreadable: skipped
    assert [e["run_id"] for e in pending_runs(wh.path)] == ["qb", "qa"]  # oldest first
    assert publish_records([c], include_pending=False).published == ["qc"]  # the queue left alone
    assert len(pending_runs(wh.path)) == 2 and _counts(wh, "qa") == (0, 0)
    out = publish_records([a])  # a queued run given again lands once, and leaves the queue
    assert out.published == ["qb", "qa"] and out.from_queue == ["qb", "qa"] and not pending_runs(wh.path)
    assert _counts(wh, "qa") == (1, 2) and _counts(wh, "qb") == (1, 2)


def test_a_bad_record_is_named_and_skipped_and_the_rest_of_the_batch_is_queued(wh, eventatlas_env):
    from eventatlas.store.publishing import PublishRejected

    good = _record(eventatlas_env / "runs", "good")
    bad = eventatlas_env / "runs" / "bad" / "run.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"run": {}}', encoding="utf-8")
    said: list[str] = []
    with Holder(wh.path):
        with pytest.raises(PublishRejected, match=r"^1 run record\(s\) not published") as ei:
            publish_records([good, bad], warn=said.append)
    out = ei.value.outcome
    assert out.queued == ["good"] and [r["record"] for r in out.rejected] == [str(bad)]
    assert out.rejected[0]["reason"].startswith("not a run record") and f"{bad}: not a run record" in str(ei.value)
    assert any(m.startswith(f"{bad}: not published: not a run record") for m in said)
    assert publish_records([]).from_queue == ["good"] and _counts(wh, "good") == (1, 2)


def _build(root: Path, build_id: str, mentions: int) -> Path:
    """A wiki build directory as ``eventatlas.wiki.build`` leaves it: manifest + Table 1."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from eventatlas.io import atomic_write_json

    bdir = root / "builds" / build_id
    bdir.mkdir(parents=True)
    pq.write_table(pa.table({"split": ["train", "dev"], "language": ["en", "en"], "mentions": [mentions - 1, 1],
                             "events": [3, 1], "trees": [1, 1], "avg_children": [2.0, 0.0], "max_depth": [1, 0]}),
                   bdir / "table1.parquet")
    atomic_write_json(bdir / "manifest.json", {
        "build_id": build_id, "dataset": "wikigrounding", "backend": {"kind": "dumps"}, "params": {"seed": 0},
        "counts": {"events": 4, "mentions": mentions}, "rejects_by_reason": {"no_anchor": 2},
        "diff": {"previous_build_id": None, "mentions_added": {"en": mentions}, "mentions_removed": {},
                 "events_added": ["Q1", "Q2", "Q3", "Q4"], "events_removed": []}})
    return bdir


def test_busy_warehouse_queues_a_wiki_build_record_and_the_next_publish_records_it(wh, eventatlas_env):
    from eventatlas.store.publishing import publish_build

    bdir = _build(eventatlas_env / "wiki", "b1", mentions=7)
    said: list[str] = []
    with Holder(wh.path):
        assert publish_build(bdir, warn=said.append) == "queued"
        assert "is busy (held by pid " in said[0] and "held by pid None" not in said[0]  # who holds it is named
        assert "build b1 queued" in said[-1] and "eventatlas publish --pending" in said[-1]
        assert [p.name for p in pending_dir(wh.path).iterdir()] == ["build-b1.json"]
        assert pending_runs(wh.path) == []  # a build entry is not mistaken for a run
    assert wh.query("SELECT count(*) FROM wiki_builds").iloc[0, 0] == 0  # nothing half-written while queued
    out = publish_records([])  # eventatlas publish --pending
    assert out.builds_from_queue == ["b1"] and out.published == []
    assert wh.query("SELECT n_mentions FROM wiki_builds WHERE build_id = 'b1'").iloc[0, 0] == 7
    assert wh.query("SELECT sum(mentions) FROM wiki_table1 WHERE build_id = 'b1'").iloc[0, 0] == 7
    assert not list(pending_dir(wh.path).iterdir())
    assert publish_records([]).builds_from_queue == []  # recorded once
    assert publish_build(bdir) == "recorded"  # a free warehouse records at once (replacing the build's rows)
    assert wh.query("SELECT count(*) FROM wiki_builds").iloc[0, 0] == 1


def test_queued_build_whose_directory_went_away_is_set_aside(wh, eventatlas_env):

    from eventatlas.store.publishing import publish_build

    bdir = _build(eventatlas_env / "wiki", "b2", mentions=3)
    with Holder(wh.path):
        assert publish_build(bdir, warn=lambda m: None) == "queued"
    shutil.rmtree(bdir)
    said: list[str] = []
    out = publish_records([], warn=said.append)
    assert out.builds_from_queue == [] and any("queued build build-b2 set aside" in m for m in said)
    assert [p.name for p in pending_dir(wh.path).iterdir()] == ["build-b2.json.bad"]

# -- three publish paths no test reached (mutants lived there): a lock that appears after some runs of a
# publish landed, a queued record that cannot be read in the middle of the queue, a failed run whose files
# are incomplete. None of them may crash the publish or lose the other runs.


def _run(root, run_id, status="completed", n=2):
    rec = new_record(run_id, flow="test", task="induction", method="quick", seed=0, device="cpu")
    write_metrics(rec, [{**_metric("d", 0.1 * i), "metric": f"m{i}"} for i in range(n)], root / run_id)
    return write_record(root / run_id, finish_record(rec, status))


def test_lock_appearing_mid_publish_queues_the_rest_and_they_land_once(wh, eventatlas_env, monkeypatch):
    runs = [_run(eventatlas_env / "runs", r) for r in ("r1", "r2", "r3")]
    real, calls = Warehouse.publish, []

    def publish(self, run, *a, **k):  # another process takes the file after the first run landed
        calls.append(run["run_id"])
        if len(calls) == 2:
            raise WarehouseLocked("warehouse is locked by another process")
        return real(self, run, *a, **k)

    monkeypatch.setattr(Warehouse, "publish", publish)
    said: list[str] = []
    out = publish_records(runs, warn=said.append)
    assert out.published == ["r1"] and out.queued == ["r2", "r3"]
    assert [e["run_id"] for e in pending_runs(wh.path)] == ["r2", "r3"]
    assert "still busy: 2 run(s) queued" in said[-1]
    monkeypatch.setattr(Warehouse, "publish", real)
    out = publish_records([])
    assert out.from_queue == ["r2", "r3"] and not pending_runs(wh.path)
    assert [_counts(wh, r) for r in ("r1", "r2", "r3")] == [(1, 2)] * 3


def test_unreadable_queued_records_are_set_aside_and_the_queue_goes_on(wh, eventatlas_env):
    root = eventatlas_env / "runs"
    a, b, c = (_run(root, r) for r in ("a", "b", "c"))
    for r, p in (("a", a), ("b", b), ("c", c)):
        queue_run(wh.path, p, r, "busy")
    shutil.rmtree(root / "a")
    (root / "a" / "run.json").mkdir(parents=True)  # unreadable: a directory where the record was
    (root / "b" / "metrics.parquet").write_bytes(b"garbage")  # its metrics are not Parquet any more
    said: list[str] = []
    out = publish_records([], warn=said.append)
    assert out.from_queue == ["c"] and _counts(wh, "c") == (1, 2)
    assert sorted(p.name for p in pending_dir(wh.path).iterdir()) == ["a.json.bad", "b.json.bad"]
    assert _counts(wh, "a") == (0, 0) and _counts(wh, "b") == (0, 0)
    assert any("queued run b set aside" in m and "ArrowInvalid" in m for m in said)


def test_failed_run_with_missing_files_is_published_as_failed(wh, eventatlas_env):
    root = eventatlas_env / "runs"
    f = _run(root, "f", status="failed")
    os.remove(root / "f" / "metrics.parquet")  # the run died before its metrics were whole
    said: list[str] = []
    out = publish_records([f], warn=said.append)
    assert out.failed == ["f"] and out.published == []
    _, rows = wh.query_rows("SELECT status FROM runs WHERE run_id = 'f'")
    assert rows == [("failed",)] and _counts(wh, "f") == (1, 0)
    assert len(said) == 1 and "published without its metrics" in said[0]


def test_completed_run_with_missing_metrics_is_named_and_skipped_and_the_rest_lands(wh, eventatlas_env):
    root = eventatlas_env / "runs"
    ok, bad = _run(root, "ok"), _run(root, "bad")
    os.remove(root / "bad" / "metrics.parquet")
    with pytest.raises(RecordError, match=rf"{bad}: run bad: a file of its record is unreadable \(FileNotFoundError"):
        publish_records([ok, bad])
    assert _counts(wh, "ok") == (1, 2) and _counts(wh, "bad") == (0, 0) and not pending_runs(wh.path)


def test_queued_build_entry_without_an_id_is_named_by_its_file_and_a_manifest_needs_one(wh, eventatlas_env):
    from eventatlas.io import atomic_write_json
    from eventatlas.store.publishing import publish_build

    bdir = _build(eventatlas_env / "wiki", "b2", mentions=3)
    atomic_write_json(pending_dir(wh.path) / "build-b2.json", {"kind": "wiki_build", "build_dir": str(bdir)})
    assert publish_records([]).builds_from_queue == ["build-b2"]
    man = json.loads((bdir / "manifest.json").read_text())
    del man["build_id"]
    (bdir / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(RecordError, match=r"manifest\.json: a build manifest needs a build_id"):
        publish_build(bdir)


def test_setting_aside_an_entry_another_publish_removed_is_quiet(wh, eventatlas_env):
    from eventatlas.store.publishing import _set_aside

    said: list[str] = []
    gone = pending_dir(wh.path) / "r9.json"
    _set_aside(gone, "record gone", said.append)
    assert json.loads((pending_dir(wh.path) / "r9.json.bad").read_text()) == {"error": "record gone"}
    assert said and "queued run r9 set aside" in said[0]


def test_outcome_dict_and_the_published_log_line(wh, eventatlas_env, caplog):
    import logging

    rec = _run(eventatlas_env / "runs", "r7")
    with caplog.at_level(logging.INFO, logger="eventatlas.publish"):
        out = publish_records([rec])
    assert set(out.as_dict()) == {"published", "failed", "skipped", "queued", "queue_reason", "from_queue",
                                  "builds_from_queue", "rejected", "metric_rows", "views", "warehouse"}
    assert f"published run r7 (completed, 2 metric rows) to {wh.path}" in caplog.messages


def test_an_empty_training_log_keeps_a_string_run_id_column():
    import pyarrow as pa

    from eventatlas.tracking.tables import TRAIN_STEPS_SCHEMA, train_log_table

    t = train_log_table([], TRAIN_STEPS_SCHEMA, "train_steps", run_id="r1")
    assert t.num_rows == 0 and t.schema.field("run_id").type == pa.string()
    assert not t.schema.field("run_id").nullable
