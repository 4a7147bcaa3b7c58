"""Three publish paths no test reached (mutants lived there): a lock that appears after some runs of a
publish landed, a queued record that cannot be read in the middle of the queue, a failed run whose files
are incomplete. None of them may crash the publish or lose the other runs."""
from __future__ import annotations

import os
import shutil

import pytest

from eventatlas.publishing import pending_dir, pending_runs, publish_records, queue_run
from eventatlas.records import RecordError, finish_record, new_record, write_metrics, write_record
from eventatlas.warehouse import Warehouse, WarehouseLocked


def _record(root, run_id, status="completed", n=2):
    rec = new_record(run_id, flow="test", task="induction", method="quick", seed=0, device="cpu")
    rows = [{"task": "induction", "dataset": "d", "method": "quick", "representation": "trigger",
             "clustering": "agglomerative", "metric": f"m{i}", "value": 0.1 * i, "seed": 0} for i in range(n)]
    write_metrics(rec, rows, root / run_id)
    return write_record(root / run_id, finish_record(rec, status))


def _counts(wh, run_id):
    _, r = wh.query_rows("SELECT (SELECT count(*) FROM runs WHERE run_id = ?), (SELECT count(*) FROM metrics WHERE run_id = ?)",
                         [run_id, run_id])
    return r[0]


@pytest.fixture
def wh(eventatlas_env, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_LOCK_TIMEOUT", "0")
    w = Warehouse()
    w.migrate()
    return w


def test_lock_appearing_mid_publish_queues_the_rest_and_they_land_once(wh, eventatlas_env, monkeypatch):
    runs = [_record(eventatlas_env / "runs", r) for r in ("r1", "r2", "r3")]
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
    a, b, c = (_record(root, r) for r in ("a", "b", "c"))
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
    f = _record(root, "f", status="failed")
    os.remove(root / "f" / "metrics.parquet")  # the run died before its metrics were whole
    said: list[str] = []
    out = publish_records([f], warn=said.append)
    assert out.failed == ["f"] and out.published == []
    _, rows = wh.query_rows("SELECT status FROM runs WHERE run_id = 'f'")
    assert rows == [("failed",)] and _counts(wh, "f") == (1, 0)
    assert len(said) == 1 and "published without its metrics" in said[0]


def test_completed_run_with_missing_metrics_is_a_record_error_before_anything_is_written(wh, eventatlas_env):
    root = eventatlas_env / "runs"
    ok, bad = _record(root, "ok"), _record(root, "bad")
    os.remove(root / "bad" / "metrics.parquet")
    with pytest.raises(RecordError, match=r"^run bad: a file of its record is unreadable \(FileNotFoundError"):
        publish_records([ok, bad])
    assert _counts(wh, "ok") == (0, 0) and not pending_runs(wh.path)
