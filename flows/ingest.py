"""``ingest``: read one dataset into the common schema and record it in the warehouse
(:func:`eventatlas.pipelines.ingest.ingest`, the job as a task that retries transient download failures)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import ingest as pipeline
from tasks.engine import prefect_engine
from tasks.ingest import ingest_task_for


@flow(name="ingest")
def ingest(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
           opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """``name`` is a reader/registry name (``eventatlas datasets`` lists ingested ones);
    ``path`` a local file or directory, or ``download=True`` for datasets with an official URL."""
    engine = prefect_engine(ingest=ingest_task_for(download))
    return pipeline.ingest(name, path, download, dataset, opts, engine=engine)["manifest"]


if __name__ == "__main__":
    import sys

    # (the ingest/<name> deployments are generated with the experiments': python -m flows.experiment --prefect-file)
    ingest(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
