"""Train task: one (method, dataset, seed) -> a run record on disk (never the warehouse).

The record (``runs/<run_id>/run.json`` + ``metrics.parquet``) is what the publish task
loads; passing a path keeps frames out of Prefect's result store. A failing method
still yields a record (status failed, error) so the failure lands in the warehouse.
"""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import get_run_logger, task

from eventatlas import config
from eventatlas.io import sha256_file, write_parquet
from eventatlas.methods import get_method
from eventatlas.methods.base import NotApplicable
from eventatlas.runinfo import code_version, device_info, new_run_id, utcnow
from eventatlas.warehouse import metrics_table

from .common import data_fingerprint, write_record


@task(name="train", task_run_name="train-{method}-{dataset}-seed{seed}")
def train_task(method: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
               dataset_dir: str | None = None, flow: str = "train-all") -> str:
    logger = get_run_logger()
    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / dataset
    run_id = new_run_id(f"{method}-{dataset}-s{seed}")
    run_dir = config.runs_dir() / run_id
    record: dict[str, Any] = {
        "run": {
            "run_id": run_id, "flow": flow, "task": "train", "method": method, "params": dict(params or {}),
            "code_version": code_version(), "data_fingerprints": {dataset: data_fingerprint(ddir)},
            "seed": seed, "started_at": utcnow().isoformat(), "device": device_info(),
        },
        "metrics_path": None,
        "artifacts": [],
    }
    try:
        result = get_method(method)(ddir, run_dir, seed=seed, **(params or {}))
        table = metrics_table(result.metrics, run_id=run_id)
        mpath = write_parquet(table, run_dir / "metrics.parquet")
        record["metrics_path"] = str(mpath)
        record["artifacts"] = [*result.artifacts,
                               {"kind": "metrics", "path": str(mpath), "rows": table.num_rows,
                                "sha256": sha256_file(mpath)}]
        record["run"]["params"] = {**record["run"]["params"], **result.params}
        record["run"]["status"] = "completed"
        logger.info("%s on %s (seed %d): %d metric rows", method, dataset, seed, table.num_rows)
    except NotApplicable as e:
        record["run"]["status"] = "skipped"
        record["run"]["error"] = f"not applicable: {e}"
        logger.warning("%s on %s (seed %d) skipped: %s", method, dataset, seed, e)
    except Exception as e:  # recorded, published, and re-raised by the flow after publishing
        record["run"]["status"] = "failed"
        record["run"]["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"
        logger.error("%s on %s (seed %d) failed: %s", method, dataset, seed, e)
    record["run"]["finished_at"] = utcnow().isoformat()
    return str(write_record(run_dir, record))


def load_metrics(record: dict[str, Any]) -> list[dict[str, Any]]:
    p = record.get("metrics_path")
    return pq.read_table(p).to_pylist() if p else []
