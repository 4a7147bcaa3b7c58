"""Landing run records in the warehouse: the core of the one writer (no Prefect here).

:func:`publish_records` is what the ``publish`` task (every flow) and the CLI's direct path call.
It never loses a run to a busy warehouse: DuckDB lets one process hold a read-write handle on a
file, and *any* handle of another process (a read-only ``duckdb -readonly`` session included)
keeps a writer out. A publish that meets such a lock waits for it (bounded by
``EVENTATLAS_LOCK_TIMEOUT`` seconds, with one message saying who holds it), and when the
warehouse is still busy it leaves the run *queued*: ``<warehouse>.pending/<run_id>.json`` points
at the run record on disk. Every later publish to the same warehouse (the next flow's, or
``eventatlas publish --pending``) lands the queued runs first. Publishing a run replaces its rows
in every table in one transaction and the queue entry is removed only after that commit, so a
run lands exactly once however often it is queued or retried.

A warehouse that cannot be written for another reason of the machine (a full disk or exceeded quota, any
other OS or DuckDB I/O error) is treated like a busy one: the runs not landed are queued. A bad record (a
malformed ``run.json``, a seed the warehouse's INTEGER column cannot hold, unreadable files of a completed
run) is named with its file and the reason and skipped: the rest of the batch lands, then
:class:`PublishRejected` lists the skipped records.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import duckdb
import pyarrow as pa

from ..atlas.manifest import read_atlas_manifest
from ..io import atomic_write_json, fault_point, is_disk_full
from ..tracking.records import RecordError, load_metrics, load_train_log, read_record
from ..tracking.runinfo import utcnow
from .warehouse import Warehouse, WarehouseError, WarehouseLocked

PENDING_SUFFIX = ".pending"
log = logging.getLogger("eventatlas.publish")


def pending_dir(warehouse_path: str | os.PathLike) -> Path:
    """The queue of runs waiting for ``warehouse_path``: ``<warehouse>.pending/`` beside the file."""
    p = Path(warehouse_path)
    return p.with_name(p.name + PENDING_SUFFIX)


def queue_run(warehouse_path: str | os.PathLike, record_path: str | os.PathLike, run_id: str, reason: str) -> Path:
    """Queue one run record for ``warehouse_path`` (atomic; queuing a run again replaces its entry)."""
    entry = pending_dir(warehouse_path) / f"{run_id}.json"
    atomic_write_json(entry, {"run_id": run_id, "record": str(Path(record_path).resolve()),
                              "queued_at": utcnow().isoformat(), "reason": reason})
    return entry


def pending_runs(warehouse_path: str | os.PathLike) -> list[dict[str, Any]]:
    """Queued runs of ``warehouse_path``, oldest first (``entry`` = the queue file)."""
    out = []
    for p in sorted(pending_dir(warehouse_path).glob("*.json")):
        try:
            e = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a half-written entry cannot exist (atomic writes); an unreadable one is skipped
        if isinstance(e, dict) and e.get("record") and e.get("run_id"):  # build entries have neither
            out.append({**e, "entry": p})
    return sorted(out, key=lambda e: (e.get("queued_at") or "", e["run_id"]))


BUILD_PREFIX = "build-"


def publish_build(build_dir: str | os.PathLike, *, warehouse_path: str | os.PathLike | None = None,
                  warn: Callable[[str], None] | None = None) -> str:
    """Record one wiki dataset build (``<build_dir>/manifest.json`` and its Table 1) in the warehouse.

    Returns ``"recorded"``, or ``"queued"`` when the warehouse stays busy after the bounded wait:
    the build then waits as ``<warehouse>.pending/build-<build_id>.json`` and the next publish
    (any flow's, or ``eventatlas publish --pending``) records it, as for a queued run.
    """
    warn = warn or log.warning
    wh = Warehouse(warehouse_path, on_wait=lambda holder: warn(busy_message(wh, holder)))
    bdir = Path(build_dir).resolve()
    man = _read_build(bdir)  # a missing or bad manifest fails here, before any queuing
    build_id = man["build_id"]
    try:
        wh.migrate()
        _record_build(wh, bdir, man)
    except WarehouseLocked as e:
        entry = pending_dir(wh.path) / f"{BUILD_PREFIX}{build_id}.json"
        atomic_write_json(entry, {"kind": "wiki_build", "build_id": build_id, "build_dir": str(bdir),
                                  "queued_at": utcnow().isoformat(), "reason": str(e)})
        warn(f"warehouse {wh.path} still busy: build {build_id} queued in {entry}; nothing is lost: "
             "`eventatlas publish --pending` (or the next flow's publish) records it")
        return "queued"
    return "recorded"


def _read_build(bdir: Path) -> dict[str, Any]:
    path = bdir / "manifest.json"
    try:
        man = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RecordError(f"{path}: not a readable build manifest ({e})") from None
    if not isinstance(man, dict) or not man.get("build_id"):
        raise RecordError(f"{path}: a build manifest needs a build_id")
    return man


def _record_build(wh: Warehouse, bdir: Path, man: dict[str, Any]) -> None:
    from ..wiki.build import record_in_warehouse  # only wiki builds need it; the run path stays light

    with wh.transaction() as con:
        record_in_warehouse(con, man, bdir)


def _land_queued_builds(wh: Warehouse, warn: Callable[[str], None]) -> list[str]:
    """Record the builds queued for ``wh`` (oldest first); a busy warehouse leaves them queued."""
    done = []
    for entry in sorted(pending_dir(wh.path).glob(f"{BUILD_PREFIX}*.json")):
        try:
            e = json.loads(entry.read_text(encoding="utf-8"))
            bdir = Path(e["build_dir"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            _set_aside(entry, f"unreadable queue entry: {err}", warn)
            continue
        try:
            _record_build(wh, bdir, _read_build(bdir))
        except WarehouseLocked:
            break
        except (RecordError, WarehouseError, OSError) as err:
            _set_aside(entry, str(err), warn)
            continue
        entry.unlink(missing_ok=True)  # only after the commit, as for runs
        done.append(e.get("build_id", entry.stem))
    return done


@dataclass
class PublishOutcome:
    """Run ids by what happened to them. ``queued``: left on disk for a later publish."""

    warehouse: str
    published: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    queue_reason: str | None = None  # why they were queued: the warehouse was busy, or could not be written
    from_queue: list[str] = field(default_factory=list)
    builds_from_queue: list[str] = field(default_factory=list)  # wiki builds recorded from the queue
    rejected: list[dict[str, str]] = field(default_factory=list)  # {"record": path, "reason": ...}: not published
    metric_rows: int = 0
    views: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"published": self.published, "failed": self.failed, "skipped": self.skipped,
                "queued": self.queued, "queue_reason": self.queue_reason, "from_queue": self.from_queue,
                "builds_from_queue": self.builds_from_queue, "rejected": self.rejected,
                "metric_rows": self.metric_rows, "views": self.views, "warehouse": self.warehouse}


class PublishRejected(RecordError):
    """Run records a publish skipped as bad (each named with its file and the reason); every other run of
    the batch landed or was queued. ``outcome``: the batch's :class:`PublishOutcome`."""

    def __init__(self, outcome: PublishOutcome):
        self.outcome = outcome
        rej = outcome.rejected
        shown = "; ".join(f"{r['record']}: {r['reason']}" for r in rej[:5]) + \
            (f"; and {len(rej) - 5} more" if len(rej) > 5 else "")
        super().__init__(f"{len(rej)} run record(s) not published: {shown}")

    def __reduce__(self) -> tuple:  # keeps the outcome across a process boundary (a Prefect task's result)
        return type(self), (self.outcome,)


SEED_RANGE = (-2**31, 2**31 - 1)  # the warehouse's seed columns are INTEGER


def check_run(rec: Mapping[str, Any]) -> None:
    """Refuse (:class:`RecordError`) a run row the warehouse cannot hold, before anything is written."""
    run = rec["run"]
    seed = run.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]):
        shown = repr(seed) if len(repr(seed)) <= 40 else f"{repr(seed)[:20]}... ({len(repr(seed))} characters)"
        raise RecordError(f"run {run['run_id']}: seed {shown} does not fit the warehouse's seed column (an "
                          f"integer from {SEED_RANGE[0]} to {SEED_RANGE[1]})")


# a warehouse the machine cannot write now (full disk, quota, I/O, a failed commit): the runs wait queued
_ENVIRONMENT = (OSError, duckdb.OperationalError, duckdb.FatalException)
# what a run's own rows make DuckDB refuse (a value out of a column's range, a broken constraint)
_BAD_ROWS = (RecordError, WarehouseError, duckdb.DataError, duckdb.IntegrityError)


def _environmental(e: BaseException) -> bool:
    return isinstance(e, _ENVIRONMENT) or isinstance(e.__cause__, _ENVIRONMENT) or is_disk_full(e)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _payload(rec: Mapping[str, Any], warn: Callable[[str], None]) -> tuple[list, Any, Any, Any]:
    """(metric rows, train steps, train evals, benchmarks) of a record. A file it names that is missing or not
    Parquet is a :class:`RecordError` naming the run; for a *failed* run it is left out with a warning
    instead (the failure is what that record is for, and a run can die before its files are whole)."""
    run = rec["run"]
    try:
        return (load_metrics(rec), load_train_log(rec, "train_steps_path"), load_train_log(rec, "train_evals_path"),
                load_train_log(rec, "benchmarks_path"))
    except (RecordError, OSError, pa.ArrowException) as e:
        msg = str(e) if isinstance(e, RecordError) else f"run {run['run_id']}: a file of its record is unreadable ({type(e).__name__}: {e})"
        if run.get("status") != "failed":
            raise RecordError(msg) from None
        warn(f"{msg}; the failed run is published without its metrics and training logs")
        return [], None, None, None


def busy_message(wh: Warehouse, holder: str) -> str:
    return (f"warehouse {wh.path} is busy (held by pid {holder}, e.g. an open duckdb session); "
            f"waiting up to {wh.lock_timeout:.0f}s (EVENTATLAS_LOCK_TIMEOUT) before queuing the run")


def publish_records(record_paths: Iterable[str | os.PathLike], *, warehouse_path: str | os.PathLike | None = None,
                    data_root: str | os.PathLike | None = None, include_pending: bool = True,
                    on_record: Callable[[Mapping[str, Any], list[dict[str, Any]]], None] | None = None,
                    warn: Callable[[str], None] | None = None) -> PublishOutcome:
    """Publish run records (paths to ``run.json``), after the runs queued for this warehouse.

    A bad record (unreadable, malformed, rows the warehouse cannot hold) is skipped with a warning naming its
    file and why, before any lock is taken; so is one whose rows DuckDB refuses. The others land, then
    :class:`PublishRejected` (a :class:`RecordError`) names the skipped ones. A busy warehouse (after the
    bounded wait), or one that cannot be written (full disk, I/O error), queues every run not yet landed and
    returns normally with them in ``queued`` (``queue_reason`` says why). ``on_record(record, metric_rows)``
    runs after each landed run (the Prefect task attaches its artifacts there); ``warn`` gets the one-line
    messages (default: the ``eventatlas.publish`` logger).
    """
    warn = warn or log.warning
    wh = Warehouse(warehouse_path, on_wait=lambda holder: warn(busy_message(wh, holder)))
    out = PublishOutcome(warehouse=str(wh.path))
    _land(record_paths, wh, out, data_root, include_pending, on_record, warn)
    if out.rejected:
        raise PublishRejected(out)
    return out


def _reject(out: PublishOutcome, path: str | os.PathLike, e: BaseException, warn: Callable[[str], None]) -> None:
    reason = _first_line(e).removeprefix(f"{path}: ")
    out.rejected.append({"record": str(path), "reason": reason})
    warn(f"{path}: not published: {reason}")


def _drop(out: PublishOutcome, path: str, entry: Path | None, from_queue_only: bool, e: BaseException,
          warn: Callable[[str], None]) -> None:
    """A run that cannot be published: a queued one is set aside, a given one rejected (named at the end)."""
    if from_queue_only:
        _set_aside(entry, str(e), warn)
    else:
        _reject(out, path, e, warn)


def _land(record_paths: Iterable[str | os.PathLike], wh: Warehouse, out: PublishOutcome, data_root: Any,
          include_pending: bool, on_record: Any, warn: Callable[[str], None]) -> None:
    from .. import config

    given: list[tuple[str, dict[str, Any]]] = []
    for p in record_paths:  # bad records and bad rows are set apart here, before any lock is taken
        try:
            rec = read_record(p)
            check_run(rec)
            _payload(rec, lambda _msg: None)  # (a failed run's warning is given once, when it lands)
        except RecordError as e:
            _reject(out, p, e, warn)
            continue
        given.append((str(Path(p).resolve()), rec))
    # (record path, record or None = read it when its turn comes, queue entry or None)
    todo: list[tuple[str, dict[str, Any] | None, Path | None]] = []
    entries = {e["run_id"]: e for e in pending_runs(wh.path)} if include_pending else {}
    given_ids = {rec["run"]["run_id"] for _, rec in given}
    todo += [(e["record"], None, e["entry"]) for run_id, e in entries.items() if run_id not in given_ids]
    todo += [(path, rec, entries[rec["run"]["run_id"]]["entry"] if rec["run"]["run_id"] in entries else None)
             for path, rec in given]

    def queue_rest(start: int, e: BaseException) -> None:
        busy = isinstance(e, WarehouseLocked)
        reason = str(e) if busy else f"the warehouse could not be written: {_first_line(e)}"
        unqueued: list[tuple[str, OSError]] = []
        for path, rec, entry in todo[start:]:
            run_id = rec["run"]["run_id"] if rec is not None else Path(entry).stem
            if entry is None:
                try:
                    queue_run(wh.path, path, run_id, reason)
                except OSError as qe:  # the queue is on the same (full) disk
                    unqueued.append((path, qe))
                    continue
            out.queued.append(run_id)
        if unqueued:  # say where each record waits, then fail with the queue's own error
            paths = " ".join(p for p, _ in unqueued)
            warn(f"{len(unqueued)} run(s) could not be queued either; their records stay on disk: "
                 f"`eventatlas publish {paths}` lands them")
            raise unqueued[0][1]
        out.queue_reason = "busy" if busy else _first_line(e)
        why = "still busy" if busy else f"could not be written ({_first_line(e)})"
        warn(f"warehouse {wh.path} {why}: {len(todo) - start} run(s) queued in {pending_dir(wh.path)}; "
             f"nothing is lost: `eventatlas publish --pending` (or the next flow's publish) lands them")

    try:
        wh.migrate()
    except WarehouseError as e:
        if isinstance(e, WarehouseLocked) or _environmental(e):
            queue_rest(0, e)
            return
        raise
    except _ENVIRONMENT as e:
        queue_rest(0, e)
        return
    if include_pending:
        out.builds_from_queue = _land_queued_builds(wh, warn)
    for i, (path, rec, entry) in enumerate(todo):
        from_queue_only = rec is None
        if rec is None:  # a queued run: its record may have gone, or gone bad, since
            try:
                rec = read_record(path)
                check_run(rec)
            except (RecordError, OSError) as e:  # e.g. unreadable: set aside, the rest of the queue goes on
                _set_aside(entry, str(e), warn)
                continue
        run = rec["run"]
        try:
            rows, steps, evals, bench = _payload(rec, warn)
        except RecordError as e:  # a queued record's files, read now (a given one's were checked above)
            _drop(out, path, entry, from_queue_only, e, warn)
            continue
        try:
            wh.publish(run, rows, rec.get("artifacts", []), train_steps=steps, train_evals=evals, benchmarks=bench,
                       model=rec.get("model"))
        except WarehouseLocked as e:
            queue_rest(i, e)
            return
        except (*_ENVIRONMENT, *_BAD_ROWS) as e:
            if _environmental(e):  # the machine's fault, not the run's: it waits with the rest
                queue_rest(i, e)
                return
            _drop(out, path, entry, from_queue_only, e, warn)
            continue
        fault_point("publish_committed")
        if entry is not None:  # only after the commit: a crash in between re-publishes (replaces) it
            Path(entry).unlink(missing_ok=True)
            fault_point("publish_dequeued")
            out.from_queue.append(run["run_id"])
        {"completed": out.published, "skipped": out.skipped}.get(run.get("status"), out.failed).append(run["run_id"])
        out.metric_rows += len(rows)
        if on_record is not None:
            on_record(rec, rows)
        log.info("published run %s (%s, %d metric rows) to %s", run["run_id"], run.get("status"), len(rows), wh.path)
    try:
        out.views = wh.refresh_views(data_root or config.data_root())
    except WarehouseLocked as e:  # the runs landed; the views follow with the next publish
        warn(f"views of {wh.path} not refreshed (busy): {e}")
    except _ENVIRONMENT as e:
        warn(f"views of {wh.path} not refreshed: {_first_line(e)}")


def _set_aside(entry: Path | None, reason: str, warn: Callable[[str], None]) -> None:
    """A queued run or build that can no longer be published (record gone or bad): keep the entry as
    ``<entry>.json.bad`` with the reason, so the queue does not block on it."""
    if entry is None:
        return
    bad = Path(str(entry) + ".bad")
    try:
        data = json.loads(Path(entry).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    atomic_write_json(bad, {**data, "error": reason})
    Path(entry).unlink(missing_ok=True)
    warn(f"queued {'build' if Path(entry).stem.startswith(BUILD_PREFIX) else 'run'} {Path(entry).stem} set aside "
         f"({bad}): {reason}")


ATLAS_TABLES = {"nodes": "atlas_nodes", "declared": "atlas_links", "learned": "atlas_links"}


def publish_atlas(atlas_root: str | os.PathLike, *, warehouse_path: str | os.PathLike | None = None,
                  warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Land an atlas build (:mod:`eventatlas.atlas.build`) in the warehouse, incrementally.

    In one transaction: the parts whose fingerprint (or file) differs from what ``atlas_parts`` holds
    have their rows replaced, the parts gone from the build's manifest lose theirs, the rest is not
    touched. Returns ``{"landed": [...], "unchanged": n, "dropped": [...]}``. The build stays on disk, so
    a publish that meets a busy warehouse (:class:`WarehouseLocked`, after the bounded wait) is simply
    run again (``eventatlas atlas publish``): it is idempotent.
    """
    from .warehouse import _insert_arrow

    warn = warn or log.warning
    root = Path(atlas_root)
    parts = read_atlas_manifest(root)["parts"]
    wh = Warehouse(warehouse_path, on_wait=lambda holder: warn(busy_message(wh, holder)))
    wh.migrate()
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict[str, Any] = {"landed": [], "unchanged": 0, "dropped": [], "warehouse": str(wh.path)}
    with wh.transaction() as con:
        have = {p: (f, s) for p, f, s in con.execute("SELECT part, fingerprint, sha256 FROM atlas_parts").fetchall()}
        for name in sorted(set(have) - set(parts)):
            for t in ("atlas_nodes", "atlas_links", "atlas_parts"):
                con.execute(f"DELETE FROM {t} WHERE part = ?", [name])
            out["dropped"].append(name)
        for name, p in sorted(parts.items()):
            if have.get(name) == (p["fingerprint"], p.get("sha256")):
                out["unchanged"] += 1
                continue
            table_name = ATLAS_TABLES[p["kind"]]
            path = root / p["path"]
            try:
                data = pq.read_table(path)
            except (OSError, pa.ArrowInvalid) as e:
                raise RecordError(f"{path}: atlas part {name} is not readable ({e})") from None
            data = data.add_column(0, "part", pa.array([name] * data.num_rows, pa.string()))
            for t in ("atlas_nodes", "atlas_links", "atlas_parts"):
                con.execute(f"DELETE FROM {t} WHERE part = ?", [name])
            _insert_arrow(con, table_name, data)
            con.execute('INSERT INTO atlas_parts (part, kind, fingerprint, sha256, "rows", path, landed_at) '
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [name, p["kind"], p["fingerprint"], p.get("sha256"), data.num_rows, str(path), utcnow()])
            out["landed"].append(name)
    from .. import config

    try:  # `atlas show` reads evidence sentences through the mentions view
        wh.refresh_views(config.data_root())
    except WarehouseLocked as e:
        warn(f"views of {wh.path} not refreshed (busy): {e}")
    return out


def publish_experiment(exp: Any, links: Iterable[Mapping[str, Any]], *,
                       warehouse_path: str | os.PathLike | None = None) -> int:
    """Record a declared experiment (:class:`eventatlas.experiments.spec.Experiment`) in the warehouse:
    its description, goal and diagnosis, its table's cells, the reference figures from its YAML, and
    ``links`` (``{cell, seed, run_id, reused}``: which run answers which cell), in one transaction
    (migrations 010, 012, 013). The declaration of (experiment, mode) is replaced; links are replaced per (cell,
    seed). Returns the number of links written."""
    from ..metric_specs import scale

    wh = Warehouse(warehouse_path)
    wh.migrate()
    now = utcnow()
    key = [exp.name, exp.mode]
    cells = exp.table_cells()
    links = list(links)
    rule = {"within": exp.goal.within, "two_sided": exp.goal.two_sided, "beats": [b.model_dump(mode="json") for b in exp.goal.beats]}
    with wh.transaction() as con:
        for t in ("experiments", "experiment_table_cells"):
            con.execute(f"DELETE FROM {t} WHERE experiment = ? AND mode = ?", key)
        con.execute("DELETE FROM experiment_references WHERE experiment = ?", [exp.name])
        con.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [*key, exp.title, exp.description, exp.goal.text, json.dumps(rule), exp.diagnosis, exp.digest(),
                     now])
        cols = ("row_label", "col_label", "row_order", "col_order", "task", "dataset", "split", "setting", "method",
                "trained_on", "representation", "clustering", "variant", "metric", "cell", "chosen_on_test")
        if cells:
            con.executemany(f"INSERT INTO experiment_table_cells (experiment, mode, {', '.join(cols)}, scale) "
                            f"VALUES ({', '.join('?' * (len(cols) + 3))})",
                            [[*key, *[c[k] for k in cols], scale(c["metric"])] for c in cells])
        refs = [[exp.name, row, col, float(v), r.source.paper, r.source.table, r.source.setting, r.source.kind]
                for r in exp.references for row, by_col in r.values.items() for col, v in by_col.items()]
        if refs:  # kind: paper | own (migration 013)
            con.executemany("INSERT INTO experiment_references (experiment, row_label, col_label, value, paper, "
                            "table_ref, setting, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", refs)
        declared = [c.name for c in exp.all_cells()]  # links of cells the declaration no longer has go
        con.execute(f"DELETE FROM experiment_runs WHERE experiment = ? AND mode = ? AND cell NOT IN "
                    f"({', '.join('?' * len(declared))})", [*key, *declared])
        for ln in links:
            con.execute("DELETE FROM experiment_runs WHERE experiment = ? AND mode = ? AND cell = ? AND seed = ?",
                        [*key, ln["cell"], int(ln["seed"])])
            con.execute("INSERT INTO experiment_runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [*key, ln["cell"], int(ln["seed"]), ln["run_id"], bool(ln.get("reused")), now])
    return len(links)
