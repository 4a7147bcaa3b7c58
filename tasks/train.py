"""Train task: one (method, dataset, seed) -> a run record on disk (never the warehouse).

The record (``runs/<run_id>/run.json`` + ``metrics.parquet``, plus ``train_steps.parquet`` /
``train_evals.parquet`` when the method's trainer wrote them; see ``eventatlas.records``) is what
the publish task loads; passing a path keeps frames out of Prefect's result store. A failing
method still yields a record (status failed, error) so the failure lands in the warehouse.
"""
from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from eventatlas import config
from eventatlas.methods import get_method
from eventatlas.methods.base import NotApplicable
from eventatlas.records import (  # noqa: F401 (load_metrics re-exported for older imports)
    attach_train_logs,
    data_fingerprint,
    finish_record,
    load_metrics,
    new_record,
    write_metrics,
    write_record,
)
from eventatlas.runinfo import new_run_id


@task(name="train", task_run_name="train-{method}-{dataset}-seed{seed}")
def train_task(method: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
               dataset_dir: str | None = None, flow: str = "train-all") -> str:
    logger = get_run_logger()
    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / dataset
    run_id = new_run_id(f"{method}-{dataset}-s{seed}")
    run_dir = config.runs_dir() / run_id
    record = new_record(run_id, flow=flow, task="train", method=method, params=params,
                        data_fingerprints={dataset: data_fingerprint(ddir)}, seed=seed)
    try:
        result = get_method(method)(ddir, run_dir, seed=seed, **(params or {}))
        record["artifacts"] = list(result.artifacts)
        table = write_metrics(record, result.metrics, run_dir)
        attach_train_logs(record, run_dir)
        record["run"]["params"] = {**record["run"]["params"], **result.params}
        finish_record(record, "completed")
        logger.info("%s on %s (seed %d): %d metric rows", method, dataset, seed, table.num_rows)
    except NotApplicable as e:
        finish_record(record, "skipped", f"not applicable: {e}")
        logger.warning("%s on %s (seed %d) skipped: %s", method, dataset, seed, e)
    except Exception as e:  # recorded, published, and re-raised by the flow after publishing
        finish_record(record, "failed", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")
        logger.error("%s on %s (seed %d) failed: %s", method, dataset, seed, e)
    return str(write_record(run_dir, record))
