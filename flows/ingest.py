"""``ingest``: read one dataset into the common schema and record it in the warehouse."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from eventatlas.results.runinfo import utcnow
from tasks.ingest import failed_ingest_record, ingest_task_for, record_ingest_task
from tasks.publish import publish_task


@flow(name="ingest")
def ingest(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
           opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """``name`` is a reader/registry name (``eventatlas datasets`` lists ingested ones);
    ``path`` a local file or directory, or ``download=True`` for datasets with an official URL."""
    started = utcnow().isoformat()
    params = {"name": name, "path": path, "download": download, "dataset": dataset, "opts": opts or {}}
    try:
        manifest = ingest_task_for(download)(name, path, download, dataset, opts)
    except Exception as e:
        # a failed ingest leaves a run record too (status failed, one-line reason, traceback file)
        try:
            publish_task([failed_ingest_record(params, e, started)])
        except Exception as pe:  # noqa: BLE001 - the ingest's own error is what the caller must see
            get_run_logger().warning("the failed ingest was not recorded: %s: %s", type(pe).__name__, pe)
        raise
    rec = record_ingest_task(manifest, params, started)
    publish_task([rec])
    return manifest


if __name__ == "__main__":
    import sys

    ingest(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
