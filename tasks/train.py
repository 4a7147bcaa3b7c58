"""Train task: one (method, dataset, seed) -> a run record on disk (never the warehouse).

The record (``runs/<run_id>/run.json`` + ``metrics.parquet``, and ``train_steps.parquet`` /
``train_evals.parquet`` for trained methods) is what the publish task loads; passing a path keeps
frames out of Prefect's result store. A failing method still yields a record (status failed, a
one-line reason; the traceback is the run's ``error.txt`` artifact) so the failure lands in the
warehouse. ``resume=True`` continues the newest unfinished run directory of the same
(method, dataset, seed, config, data) from its last checkpoint.
"""
from __future__ import annotations

import hashlib
import json
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task

from eventatlas import config
from eventatlas.io import atomic_write_text, sha256_file, write_parquet
from eventatlas.methods import get_spec
from eventatlas.methods.base import NotApplicable
from eventatlas.methods.spec import json_params
from eventatlas.runinfo import code_version, new_run_id, utcnow
from eventatlas.warehouse import metrics_table

from .common import data_fingerprint, write_record


def run_prefix(method: str, dataset: str, seed: int, cfg_json: dict[str, Any], fingerprint: str) -> str:
    """Runs of the same configuration on the same data share this prefix (what --resume looks for)."""
    key = hashlib.sha256(json.dumps([cfg_json, fingerprint], sort_keys=True).encode()).hexdigest()[:8]
    return f"{method}-{dataset}-s{seed}-{key}"


def unfinished_run(prefix: str) -> str | None:
    """The newest run directory with ``prefix`` that has no run record yet (killed mid-run)."""
    cands = sorted((p for p in config.runs_dir().glob(f"{prefix}-*") if p.is_dir() and not (p / "run.json").exists()),
                   key=lambda p: p.name)
    return cands[-1].name if cands else None


def _concat(paths: list[str], target: Path) -> str | None:
    if not paths:
        return None
    return str(write_parquet(pa.concat_tables([pq.read_table(p) for p in paths]), target))


@task(name="train", task_run_name="train-{method}-{dataset}-seed{seed}")
def train_task(method: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
               dataset_dir: str | None = None, flow: str = "train-all", device: str = "auto",
               resume: bool = False) -> str:
    logger = get_run_logger()
    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / dataset
    spec = get_spec(method)
    cfg = spec.validate(params)
    if "device" not in cfg.model_fields_set:  # a method's own device setting wins over the flow's
        cfg = cfg.model_copy(update={"device": device})
    fingerprint = data_fingerprint(ddir)
    prefix = run_prefix(method, dataset, seed, cfg.model_dump(mode="json"), fingerprint)
    run_id = (unfinished_run(prefix) if resume else None) or new_run_id(prefix)
    run_dir = config.runs_dir() / run_id
    record: dict[str, Any] = {
        "run": {
            "run_id": run_id, "flow": flow, "task": "train", "method": method, "params": {"config": json_params(cfg)},
            "code_version": code_version(), "data_fingerprints": {dataset: fingerprint},
            "seed": seed, "started_at": utcnow().isoformat(), "device": cfg.device,
        },
        "metrics_path": None,
        "artifacts": [],
    }
    try:
        kw = {"resume": True} if resume else {}
        result = spec.runner()(ddir, run_dir, seed=seed, config=cfg, **kw)
        table = metrics_table(result.metrics, run_id=run_id)
        mpath = write_parquet(table, run_dir / "metrics.parquet")
        record["metrics_path"] = str(mpath)
        record["train_steps_path"] = _concat(result.train_steps, run_dir / "train_steps.parquet")
        record["train_evals_path"] = _concat(result.train_evals, run_dir / "train_evals.parquet")
        record["artifacts"] = [*result.artifacts,
                               {"kind": "metrics", "path": str(mpath), "rows": table.num_rows,
                                "sha256": sha256_file(mpath)}]
        record["run"]["params"] = {**record["run"]["params"], **result.params}
        record["run"]["device"] = result.device or cfg.device
        record["run"]["status"] = "completed"
        logger.info("%s on %s (seed %d): %d metric rows", method, dataset, seed, table.num_rows)
    except NotApplicable as e:
        record["run"]["status"] = "skipped"
        record["run"]["error"] = f"not applicable: {e}"
        logger.warning("%s on %s (seed %d) skipped: %s", method, dataset, seed, e)
    except Exception as e:  # recorded, published, and re-raised by the flow after publishing
        tb = run_dir / "error.txt"
        atomic_write_text(tb, traceback.format_exc())
        first = (str(e).strip().splitlines() or [""])[0]
        record["run"]["status"] = "failed"
        record["run"]["error"] = f"{type(e).__name__}: {first} (traceback: {tb})"
        record["artifacts"].append({"kind": "traceback", "path": str(tb)})
        logger.error("%s on %s (seed %d) failed: %s", method, dataset, seed, record["run"]["error"])
    record["run"]["finished_at"] = utcnow().isoformat()
    return str(write_record(run_dir, record))


def load_metrics(record: dict[str, Any]) -> list[dict[str, Any]]:
    p = record.get("metrics_path")
    return pq.read_table(p).to_pylist() if p else []
