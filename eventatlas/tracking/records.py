"""Run records: what a run leaves on disk for the publish path to land in the warehouse.

``<run_dir>/run.json``::

    {"run": {run_id, flow, task, method, params, code_version, data_fingerprints, seed,
             started_at, finished_at, status, device, precision, error},
     "metrics_path": ".../metrics.parquet" | null,      # eventatlas.tracking.tables.METRICS_SCHEMA
     "artifacts": [{kind, path, rows, sha256}, ...],   # kind "plot/..." + a .png path: shown in Prefect
     "train_steps_path": ".../train_steps.parquet",     # optional, tables.TRAIN_STEPS_SCHEMA
     "train_evals_path": ".../train_evals.parquet",     # optional, tables.TRAIN_EVALS_SCHEMA
     "benchmarks_path": ".../benchmarks.parquet"}       # benchmark runs, eventatlas.schema.BENCHMARKS

A method run's ``precision`` (fp32 | bf16) and concrete device are also in ``params.config`` (the run's
configuration identity: two runs differing only in precision are different configurations).
Relative paths in a record are relative to its directory. Core code writes records (no Prefect
here); the ``publish`` task (flows, ``eventatlas publish PATH...``) is the one warehouse writer.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from ..io import atomic_write_json, sha256_file, write_parquet
from ..names import is_name, under
from .runinfo import code_version, device_info, utcnow

RECORD_NAME = "run.json"
TRAIN_STEPS_FILE = "train_steps.parquet"
TRAIN_EVALS_FILE = "train_evals.parquet"
PATH_KEYS = ("metrics_path", "train_steps_path", "train_evals_path", "benchmarks_path")


class RecordError(ValueError):
    """A run record that cannot be read or published; the message names the file."""


def new_record(run_id: str, *, flow: str, task: str, method: str | None = None,
               params: Mapping[str, Any] | None = None, data_fingerprints: Mapping[str, str] | None = None,
               seed: int | None = None, started_at: str | None = None, **run_fields: Any) -> dict[str, Any]:
    """A record for a run starting now (code version, device, start time filled in); finish it
    with :func:`finish_record` and write it with :func:`write_record`."""
    run = {"run_id": run_id, "flow": flow, "task": task, "method": method, "params": dict(params or {}),
           "code_version": code_version(), "data_fingerprints": dict(data_fingerprints or {}), "seed": seed,
           "started_at": started_at or utcnow().isoformat(), **run_fields}
    if "device" not in run:  # not setdefault: describing the device imports torch (seconds), even when given
        run["device"] = device_info()
    return {"run": run, "metrics_path": None, "artifacts": []}


def finish_record(record: dict[str, Any], status: str = "completed", error: str | None = None) -> dict[str, Any]:
    record["run"]["status"] = status
    if error is not None:
        record["run"]["error"] = error
    record["run"]["finished_at"] = utcnow().isoformat()
    return record


def fail_record(record: dict[str, Any], exc: BaseException, run_dir: str | os.PathLike) -> dict[str, Any]:
    """Finish ``record`` as ``failed``: the traceback of ``exc`` goes to ``<run_dir>/error.txt`` (listed as
    the ``traceback`` artifact), the run's ``error`` is one line ``Type: first line (traceback: path)``."""
    import traceback

    from ..io import atomic_write_text

    tb = Path(run_dir) / "error.txt"
    atomic_write_text(tb, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    first = (str(exc).strip().splitlines() or [""])[0]
    record.setdefault("artifacts", []).append({"kind": "traceback", "path": str(tb)})
    return finish_record(record, "failed", f"{type(exc).__name__}: {first} (traceback: {tb})")


def write_metrics(record: dict[str, Any], rows: Iterable[Mapping[str, Any]], run_dir: str | os.PathLike) -> pa.Table:
    """Validate the metric rows (``task`` required), write ``<run_dir>/metrics.parquet``, point the
    record at it and list it as a ``metrics`` artifact."""
    from .tables import metrics_table

    table = metrics_table(rows, run_id=record["run"]["run_id"])
    path = write_parquet(table, Path(run_dir) / "metrics.parquet")
    record["metrics_path"] = str(path)
    record["artifacts"] = [a for a in record.get("artifacts", []) if a.get("kind") != "metrics"]
    record["artifacts"].append({"kind": "metrics", "path": str(path), "rows": table.num_rows,
                                "sha256": sha256_file(path)})
    return table


def attach_train_logs(record: dict[str, Any], run_dir: str | os.PathLike) -> dict[str, Any]:
    """Point the record at ``train_steps.parquet`` / ``train_evals.parquet`` in ``run_dir`` when a
    trainer wrote them (so the publish path lands them in the warehouse)."""
    for key, name in (("train_steps_path", TRAIN_STEPS_FILE), ("train_evals_path", TRAIN_EVALS_FILE)):
        p = Path(run_dir) / name
        if p.exists():
            record[key] = str(p)
    return record


def write_record(run_dir: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    path = Path(run_dir) / RECORD_NAME
    atomic_write_json(path, dict(record))
    return path


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    """Read ``run.json``; relative paths in it are resolved against its directory."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: run record not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: not a JSON run record ({e})") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("run"), dict) or not rec["run"].get("run_id"):
        raise RecordError(f"{path}: not a run record (needs {{\"run\": {{\"run_id\": ...}}, ...}})")
    base = path.resolve().parent

    def resolve(p: Any) -> Any:
        return str(base / p) if isinstance(p, str) and p and not Path(p).is_absolute() else p

    for key in PATH_KEYS:
        rec[key] = resolve(rec.get(key))
    rec["artifacts"] = [{**a, "path": resolve(a.get("path"))} for a in rec.get("artifacts") or []]
    return rec


def find_records(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Run records named by ``paths``: a ``run.json``, a run directory holding one, or a directory
    searched recursively. Each path must yield at least one record; duplicates are dropped."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found = [p]
        elif (p / RECORD_NAME).is_file():
            found = [p / RECORD_NAME]
        elif p.is_dir():
            found = sorted(p.rglob(RECORD_NAME))
            if not found:
                raise RecordError(f"{p}: no {RECORD_NAME} under this directory")
        else:
            raise RecordError(f"{p}: no such file or directory")
        out += [f.resolve() for f in found]
    return list(dict.fromkeys(out))


def load_metrics(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's metric rows. A ``metrics.parquet`` written before rows carried a task (no
    ``task`` column) is upgraded with migration 003's mapping, so old records re-publish."""
    p = record.get("metrics_path")
    if not p:
        return []
    table = pq.read_table(p)
    rows = table.to_pylist()
    if "task" not in table.column_names:
        from .tables import legacy_metric_keys

        rows = [{**r, **legacy_metric_keys(r.get("clustering"), r["metric"])} for r in rows]
    return rows


def load_train_log(record: Mapping[str, Any], key: str) -> pa.Table | None:
    """``key`` is ``train_steps_path``, ``train_evals_path`` or ``benchmarks_path``; None when the record has none."""
    p = record.get(key)
    if not p:
        return None
    if not Path(p).exists():
        raise RecordError(f"{p}: {key} of run {record['run']['run_id']} does not exist")
    return pq.read_table(p)


def ingest_record(manifest: Mapping[str, Any], params: Mapping[str, Any], started_at: str,
                  runs_dir: str | os.PathLike | None = None) -> Path:
    """Write the run record of an ingest (its tables and manifest as artifacts) and return its path;
    the publish path lands it (the ``ingest`` flow and the CLI's direct path alike).
    ``manifest``: what :func:`eventatlas.data.ingest.ingest` returned, ``dataset_dir`` added."""
    from .. import config
    from .runinfo import new_run_id

    ddir = Path(manifest.get("dataset_dir") or config.datasets_dir() / manifest["dataset"])
    ds = manifest.get("dataset") or ddir.name
    run_id = new_run_id(f"ingest-{ds}")
    rows = manifest.get("rows") or {}
    arts = [{"kind": f"table/{p.stem}", "path": str(p), "rows": rows.get(p.stem), "sha256": sha256_file(p)}
            for p in sorted(ddir.glob("*.parquet"))]
    arts.append({"kind": "manifest", "path": str(ddir / "manifest.json"), "rows": None,
                 "sha256": sha256_file(ddir / "manifest.json")})
    record = {
        "run": {"run_id": run_id, "flow": "ingest", "task": "ingest", "method": None, "params": dict(params),
                "code_version": code_version(), "data_fingerprints": {ds: data_fingerprint(ddir)}, "seed": None,
                "started_at": started_at, "finished_at": utcnow().isoformat(), "status": "completed",
                "device": device_info(import_torch=False)},
        "metrics_path": None,
        "artifacts": arts,
    }
    return write_record(under(runs_dir or config.runs_dir(), run_id, "run id"), record)


def failed_ingest_record(params: Mapping[str, Any], exc: BaseException, started_at: str,
                         runs_dir: str | os.PathLike | None = None) -> Path:
    """Write the run record of an ingest that failed (status ``failed``, a one-line reason, the
    traceback in ``runs/<run_id>/error.txt``) and return its path; the ``ingest`` flow's failure path
    and the CLI's direct path alike."""
    from .. import config
    from .runinfo import new_run_id

    ds = params.get("dataset") or params.get("name") or "unknown"
    run_id = new_run_id(f"ingest-{ds if is_name(ds) else 'badname'}")  # the failure may be that very name
    run_dir = under(runs_dir or config.runs_dir(), run_id, "run id")
    # nothing was computed: the device is described without importing torch
    record = new_record(run_id, flow="ingest", task="ingest", params=params, started_at=started_at,
                        device=device_info(import_torch=False))
    fail_record(record, exc, run_dir)
    return write_record(run_dir, record)


def data_fingerprint(dataset_dir: str | os.PathLike) -> str:
    """What a run records about its data (:meth:`eventatlas.data.Manifest.data_fingerprint`)."""
    from ..data import Manifest

    return Manifest.read(dataset_dir).data_fingerprint()
