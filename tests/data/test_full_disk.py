"""A full disk (ENOSPC) or an exceeded quota (EDQUOT), simulated by making the write raise what the system
raises: one line naming the file (exit 1, not an "internal failure"), no temporary file left behind, the
previous version untouched, and a publish that cannot write the warehouse queued for `publish --pending`.
Bad run records in a publish batch are named and skipped while the rest lands."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.cli import app
from eventatlas.io import DiskFull, atomic_write_json, write_parquet
from eventatlas.store.publishing import PublishRejected, pending_runs, publish_records
from eventatlas.store.warehouse import Warehouse
from eventatlas.tracking.records import finish_record, new_record, write_metrics, write_record

MAVEN = Path(__file__).resolve().parents[2] / "datasets" / "samples" / "maven" / "train.jsonl"


def _full(code: int = errno.ENOSPC) -> OSError:
    """What pyarrow raises when the disk fills: the errno, the system's text, no file name."""
    return OSError(code, f"Error writing bytes to file. Detail: [errno {code}] {os.strerror(code)}")


@pytest.fixture
def env(eventatlas_env, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    return eventatlas_env


def _leftovers(root: Path) -> list[str]:
    """Temporaries anywhere under ``root``: staging directories, temp files, half-kept versions."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name == ".staging" or p.name.endswith((".tmp", ".partial", ".old")))


def _ingest() -> object:
    return CliRunner().invoke(app, ["ingest", "maven", "--path", str(MAVEN), "--dataset", "m"])


def _snapshot(ddir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(ddir.iterdir()) if p.is_file()}


@pytest.mark.parametrize("where", ["open", "write", "close", "manifest", "keep_version"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_during_ingest_is_one_line_and_leaves_nothing_behind(env, where, code):
    r = _ingest()
    assert r.exit_code == 0, r.output
    ddir = config.datasets_dir() / "m"
    before = _snapshot(ddir)
    with pytest.MonkeyPatch.context() as mp:
        _fill_disk(mp, where, code)
        r = _ingest()
    assert r.exit_code == 1, r.output
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "internal failure" not in err[0], r.output
    assert os.strerror(code) in err[0] and "free disk space" in err[0]
    shown = ddir.parent / ".versions" / "m" if where == "keep_version" else ddir
    assert err[0].startswith(f"error: {shown}"), err[0]
    assert _leftovers(config.data_root()) == []
    assert _snapshot(ddir) == before  # the previous version, byte for byte


def _fill_disk(monkeypatch, where: str, code: int) -> None:
    """Make the write at ``where`` of an ingest fail as a full disk does."""
    calls = {"n": 0}
    if where == "open":  # the disk fills while the table files are being created (the 3rd one fails)
        real = pq.ParquetWriter.__init__

        def init(self, *a, **k):
            calls["n"] += 1
            if calls["n"] == 3:
                raise _full(code)
            real(self, *a, **k)

        monkeypatch.setattr(pq.ParquetWriter, "__init__", init)
    elif where in ("write", "close"):
        def fail(self, *a, **k):
            raise _full(code)

        monkeypatch.setattr(pq.ParquetWriter, "write_table" if where == "write" else "close", fail)
    elif where == "manifest":
        real_write = Path.write_text

        def write_text(self, *a, **k):
            if self.name.startswith(".manifest.json."):
                raise OSError(code, os.strerror(code))
            return real_write(self, *a, **k)

        monkeypatch.setattr(Path, "write_text", write_text)
    else:  # the hard links that keep the replaced version (a copy where links fail)
        def link(src, dst):
            raise OSError(code, os.strerror(code), str(dst))

        monkeypatch.setattr("eventatlas.data.ingest.link_file", link)


def test_atomic_writers_name_the_target_and_remove_their_temporary(tmp_path, monkeypatch):
    real_write = Path.write_text

    def write_text(self, *a, **k):
        real_write(self, "half", encoding="utf-8")  # part of it written, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    target = tmp_path / "out" / "x.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "write_text", write_text)
        with pytest.raises(DiskFull) as ei:
            atomic_write_json(target, {"a": 1})
    assert ei.value.filename == str(target) and ei.value.errno == errno.ENOSPC
    assert list((tmp_path / "out").iterdir()) == []
    import pyarrow as pa

    monkeypatch.setattr(pq, "write_table", lambda *a, **k: (_ for _ in ()).throw(_full(errno.EDQUOT)))
    with pytest.raises(DiskFull, match="Disk quota exceeded") as ei:
        write_parquet(pa.table({"a": [1]}), tmp_path / "out" / "t.parquet")
    assert ei.value.filename == str(tmp_path / "out" / "t.parquet") and list((tmp_path / "out").iterdir()) == []


# ----------------------------------------------------------------------------- publish
def _record(run_id: str, seed: int = 0, status: str = "completed") -> Path:
    root = config.runs_dir()
    rec = new_record(run_id, flow="test", task="induction", method="quick", seed=seed, device="cpu")
    write_metrics(rec, [{"task": "induction", "dataset": "d", "method": "quick", "metric": "ari", "value": 0.5,
                         "seed": 0}], root / run_id)
    return write_record(root / run_id, finish_record(rec, status))


def _landed(run_id: str) -> int:
    return Warehouse().query_rows("SELECT count(*) FROM runs WHERE run_id = ?", [run_id])[1][0][0]


@pytest.mark.parametrize("failure", ["commit", "oserror", "migrate"])
def test_a_publish_that_cannot_write_the_warehouse_is_queued_for_pending(env, failure):
    a, b = _record("a"), _record("b")
    Warehouse().migrate()
    wal = f'{config.warehouse_path()}.wal'
    if failure == "commit":  # what DuckDB raises when the disk fills at COMMIT
        exc = duckdb.TransactionException(f'TransactionContext Error: Failed to commit: Could not write file "{wal}": '
                                          "No space left on device")
    else:
        exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), wal)
    said: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Warehouse, "migrate" if failure == "migrate" else "publish",
                   lambda self, *a, **k: (_ for _ in ()).throw(exc))
        out = publish_records([a, b], warn=said.append)
        assert out.queued == ["a", "b"] and out.published == [] and "No space left on device" in out.queue_reason
        assert [e["run_id"] for e in pending_runs(config.warehouse_path())] == ["a", "b"]
        assert "could not be written" in said[-1] and "publish --pending" in said[-1]
        # the CLI says so in one line, exit 1, and the runs stay queued
        r = CliRunner().invoke(app, ["publish", str(a)])
        assert r.exit_code == 1 and "internal failure" not in r.output, r.output
        assert "could not be written (" in r.output and "No space left on device" in r.output
        assert "eventatlas publish --pending" in r.output
    r = CliRunner().invoke(app, ["publish", "--pending"])
    assert r.exit_code == 0, r.output
    assert _landed("a") == 1 and _landed("b") == 1 and pending_runs(config.warehouse_path()) == []


def test_bad_records_are_named_and_skipped_and_the_rest_of_the_batch_lands(env):
    """A run with a 23-digit seed (it ran, failed, and wrote its record) and a malformed run.json no longer
    make `publish data/runs` fail for every record."""
    good = [_record("good1"), _record("good2")]
    huge = _record("huge", seed=10**22, status="failed")
    broken = config.runs_dir() / "broken" / "run.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"run": ', encoding="utf-8")
    r = CliRunner().invoke(app, ["publish", str(config.runs_dir())])
    assert r.exit_code == 2, r.output
    assert "published 2 run records (2 completed" in r.output
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("error: 2 run record(s) not published: ")
    assert f"{broken}: not a JSON run record" in last
    assert f"{huge}: run huge: seed 10000000000000000000000 does not fit the warehouse's seed column" in last
    assert "internal failure" not in r.output
    assert [_landed(g.parent.name) for g in good] == [1, 1] and _landed("huge") == 0
    with pytest.raises(PublishRejected) as ei:  # the core says the same
        publish_records([*good, huge])
    assert [x["record"] for x in ei.value.outcome.rejected] == [str(huge)] and ei.value.outcome.published == [
        "good1", "good2"]


def test_rows_duckdb_refuses_name_the_record_and_the_rest_lands(env):
    """A value DuckDB itself refuses (here a start time it cannot read) is the record's fault: named, skipped."""
    ok, bad = _record("ok"), _record("bad")
    rec = json.loads(bad.read_text())
    rec["run"]["started_at"] = "not a time"
    bad.write_text(json.dumps(rec))
    with pytest.raises(PublishRejected, match=rf"{bad}: Conversion Error") as ei:
        publish_records([ok, bad], warn=lambda m: None)
    assert ei.value.outcome.published == ["ok"] and _landed("ok") == 1 and _landed("bad") == 0
    assert pending_runs(config.warehouse_path()) == []


def test_runs_that_cannot_even_be_queued_are_each_named(env):
    """The queue lives beside the warehouse, on the same full disk: every run neither landed nor queued is
    named with the command that lands it, and the error names the queue file."""
    a, b = _record("a"), _record("b")
    Warehouse().migrate()
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{config.warehouse_path()}.wal")
    said: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Warehouse, "publish", lambda self, *x, **k: (_ for _ in ()).throw(full))
        mp.setattr("eventatlas.io.tempfile.mkstemp", lambda *x, **k: (_ for _ in ()).throw(
            OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
        with pytest.raises(DiskFull, match="No space left on device") as ei:
            publish_records([a, b], warn=said.append)
    assert ei.value.filename.startswith(f"{config.warehouse_path()}.pending")
    assert said[-1] == (f"2 run(s) could not be queued either; their records stay on disk: "
                        f"`eventatlas publish {a} {b}` lands them")
    assert publish_records([a, b]).published == ["a", "b"]
