"""``ingest``: read one dataset into the common schema, then record the ingest as a run in the warehouse.
A failed ingest leaves a run record too (status failed, a one-line reason, the traceback file)."""
from __future__ import annotations

from typing import Any

from .engine import Engine


def ingest_step(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
                opts: dict[str, Any] | None = None, *, warn: Any = None) -> dict[str, Any]:
    """The job itself (:func:`eventatlas.data.ingest.ingest_dataset`); a download is tried again after a
    transient failure (Prefect's task retries do this under a flow, which passes its own step)."""
    from ..data.download import retry_transient
    from ..data.ingest import ingest_dataset

    job = lambda: ingest_dataset(name, path, download, dataset, opts)  # noqa: E731
    return retry_transient(job, warn=warn) if download else job()


def ingest(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
           opts: dict[str, Any] | None = None, *, engine: Engine) -> dict[str, Any]:
    """``{"manifest", "published"}``: the dataset's manifest (``dataset_dir`` added) and what the publish
    path did with its run record (``queued`` when the warehouse was busy: the run waits on disk)."""
    from ..tracking.records import failed_ingest_record, ingest_record
    from ..tracking.runinfo import utcnow

    started = utcnow().isoformat()
    params = {"name": name, "path": path, "download": download, "dataset": dataset, "opts": opts or {}}
    step = engine.step("ingest", lambda *a: ingest_step(*a, warn=engine.warn))
    try:
        manifest = step(name, path, download, dataset, opts)
    except Exception as e:
        try:
            engine.publish([str(failed_ingest_record(params, e, started))])
        except Exception as pe:  # noqa: BLE001 - the ingest's own error is what the caller must see
            engine.warn(f"the failed ingest was not recorded: {type(pe).__name__}: {pe}")
        raise
    published = engine.publish([str(ingest_record(manifest, params, started))])
    return {"manifest": manifest, "published": published}
