"""``evaluate``: score an assignments Parquet against a dataset's labels and publish the metrics."""
from __future__ import annotations

from prefect import flow

from eventatlas import config
from eventatlas.io import atomic_write_json, write_parquet
from eventatlas.runinfo import code_version, device_info, new_run_id, utcnow
from eventatlas.warehouse import metrics_table
from tasks.common import data_fingerprint
from tasks.evaluate import evaluate_task
from tasks.publish import publish_task


@flow(name="evaluate")
def evaluate(assignments: str, dataset: str, method: str = "external", representation: str | None = None,
             clustering: str | None = None, seed: int = 0) -> list[dict]:
    """Score ``assignments`` (mention_id, cluster) against ``dataset``'s primary labels; one run published."""
    ddir = config.datasets_dir() / dataset
    started = utcnow().isoformat()
    rows = evaluate_task(assignments, str(ddir / "mentions.parquet"), dataset=dataset, method=method,
                         representation=representation, clustering=clustering, seed=seed)
    run_id = new_run_id(f"evaluate-{dataset}")
    run_dir = config.runs_dir() / run_id
    mpath = write_parquet(metrics_table(rows, run_id=run_id), run_dir / "metrics.parquet")
    record = {"run": {"run_id": run_id, "flow": "evaluate", "task": "evaluate", "method": method,
                      "params": {"assignments": assignments, "representation": representation,
                                 "clustering": clustering},
                      "code_version": code_version(), "data_fingerprints": {dataset: data_fingerprint(ddir)},
                      "seed": seed, "started_at": started, "finished_at": utcnow().isoformat(),
                      "status": "completed", "device": device_info()},
              "metrics_path": str(mpath),
              "artifacts": [{"kind": "assignments", "path": assignments}]}
    atomic_write_json(run_dir / "run.json", record)
    publish_task([str(run_dir / "run.json")])
    return rows
