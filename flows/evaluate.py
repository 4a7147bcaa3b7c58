"""``evaluate``: score an assignments Parquet against a dataset's labels and publish the metrics."""
from __future__ import annotations

from prefect import flow

from eventatlas import config
from eventatlas.tracking.records import data_fingerprint, finish_record, new_record, write_metrics, write_record
from eventatlas.tracking.runinfo import new_run_id, utcnow
from tasks.evaluate import evaluate_task
from tasks.publish import publish_task


@flow(name="evaluate")
def evaluate(assignments: str, dataset: str, method: str = "external", representation: str | None = None,
             clustering: str | None = None, seed: int = 0, variant: str | None = None) -> list[dict]:
    """Score ``assignments`` (mention_id, cluster) against ``dataset``'s primary labels; one run published.
    ``clustering`` names the algorithm only; anything else that tells configurations apart goes in ``variant``."""
    ddir = config.datasets_dir() / dataset
    started = utcnow().isoformat()
    rows = evaluate_task(assignments, str(ddir / "mentions.parquet"), dataset=dataset, method=method,
                         representation=representation, clustering=clustering, seed=seed, variant=variant)
    run_id = new_run_id(f"evaluate-{dataset}")
    run_dir = config.runs_dir() / run_id
    record = new_record(run_id, flow="evaluate", task="evaluate", method=method,
                        params={"assignments": assignments, "representation": representation,
                                "clustering": clustering, "variant": variant},
                        data_fingerprints={dataset: data_fingerprint(ddir)}, seed=seed, started_at=started)
    record["artifacts"] = [{"kind": "assignments", "path": assignments}]
    write_metrics(record, rows, run_dir)
    publish_task([str(write_record(run_dir, finish_record(record)))])
    return rows
