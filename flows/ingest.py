"""``ingest``: read one dataset into the common schema and record it in the warehouse."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.runinfo import utcnow
from tasks.ingest import ingest_task_for, record_ingest_task
from tasks.publish import publish_task


@flow(name="ingest")
def ingest(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
           opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """``name`` is a reader/registry name (``eventatlas datasets`` lists ingested ones);
    ``path`` a local file or directory, or ``download=True`` for datasets with an official URL."""
    started = utcnow().isoformat()
    manifest = ingest_task_for(download)(name, path, download, dataset, opts)
    rec = record_ingest_task(manifest, {"name": name, "path": path, "download": download, "dataset": dataset,
                                        "opts": opts or {}}, started)
    publish_task([rec])
    return manifest


if __name__ == "__main__":
    import sys

    ingest(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
