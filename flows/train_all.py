"""``train-all``: every method x every labelled dataset x every seed, published to the warehouse."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from eventatlas import config
from tasks.common import ingested, labelled_datasets
from tasks.publish import publish_task, summarize_task
from tasks.train import train_task


@flow(name="train-all", log_prints=True)
def train_all(
    datasets: list[str] | None = None,
    methods: list[str] | None = None,
    seeds: list[int] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run each method on each dataset with labels (or ``datasets``) for each seed.

    ``params`` maps a method name to its keyword parameters, e.g.
    ``{"untuned": {"representations": ["trigger"], "clusterings": ["agglomerative"]}}``.
    Each run is published as soon as it finishes (the publish task is the only
    warehouse writer); the flow fails at the end if any run failed, after publishing it.
    Runs a method declares not applicable (e.g. a sample with one unseen type) are
    published as ``skipped`` with the reason and do not fail the flow.
    """
    logger = get_run_logger()
    methods = list(methods or ["untuned"])
    seeds = [int(s) for s in (seeds or [0])]
    params = dict(params or {})
    available = ingested()
    if datasets:
        missing = [d for d in datasets if d not in available]
        if missing:
            raise ValueError(f"not ingested: {missing} (have {sorted(available)} under {config.datasets_dir()}); "
                             f"run `eventatlas ingest <name> --path ...` first")
        names = list(datasets)
    else:
        names = labelled_datasets()
    if not names:
        raise ValueError(f"no labelled dataset under {config.datasets_dir()}: run `eventatlas ingest-samples` "
                         f"or `eventatlas ingest <name> --path ...` first")
    logger.info("train-all: methods=%s datasets=%s seeds=%s", methods, names, seeds)
    records: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    for method in methods:
        for name in names:
            for seed in seeds:
                rec = train_task(method, name, seed, params.get(method, {}), str(available[name]))
                out = publish_task([rec])
                records.append(rec)
                failed += out["failed"]
                skipped += out["skipped"]
    summarize_task(records)
    summary = {"runs": len(records), "records": records, "failed": failed, "skipped": skipped,
               "warehouse": out["warehouse"]}
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(records)} runs failed (published with status 'failed'): {failed}")
    return summary


if __name__ == "__main__":
    train_all()
