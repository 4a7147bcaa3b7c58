"""Ingest task: one reader into one dataset directory (retries only transient download failures)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from eventatlas import config


@task(name="ingest", task_run_name="ingest-{name}")
def ingest_task(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
                opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Returns the manifest plus ``dataset_dir`` (where the tables landed)."""
    from eventatlas.ingest import ingest

    logger = get_run_logger()
    manifest = ingest(name, path, dataset=dataset, download=download, **(opts or {}))
    ds = manifest.get("dataset") or dataset or name
    out = {**manifest, "dataset_dir": str(manifest.get("path") or (config.datasets_dir() / ds))}
    source = manifest.get("source") or path
    how = "downloaded to" if manifest.get("download") else "from"
    logger.info("ingested %s %s %s: rows=%s rejects=%s", ds, how, source, manifest.get("rows"),
                manifest.get("rejects"))
    return out


def transient_failure(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry only a download that failed for a reason that may pass
    (connection errors, 429, 5xx). A checksum refusal, a missing checksum or bad input is final."""
    from eventatlas.download import DownloadFailed

    exc = state.data if isinstance(state.data, BaseException) else state.result(raise_on_failure=False)
    return isinstance(exc, DownloadFailed) and exc.transient


def ingest_task_for(download: bool):
    """Network tasks retry transient failures (after the downloader's own retries); the rest fails fast."""
    if not download:
        return ingest_task
    return ingest_task.with_options(retries=3, retry_delay_seconds=[10, 30, 90], retry_condition_fn=transient_failure)


@task(name="ingest-samples")
def ingest_samples_task() -> list[dict[str, Any]]:
    from eventatlas.ingest import ingest_samples

    logger = get_run_logger()
    manifests = ingest_samples()
    if isinstance(manifests, dict):  # name -> manifest
        manifests = list(manifests.values())
    logger.info("ingested %d sample datasets", len(manifests))
    return [m for m in manifests]


def dataset_dir_of(manifest: dict[str, Any]) -> Path:
    return Path(manifest.get("dataset_dir") or config.datasets_dir() / manifest["dataset"])


@task(name="record-ingest")
def record_ingest_task(manifest: dict[str, Any], params: dict[str, Any], started_at: str) -> str:
    """A run record for an ingest (tables as artifacts), for the publish task to land."""
    from eventatlas.io import sha256_file
    from eventatlas.runinfo import code_version, device_info, new_run_id, utcnow

    from .common import data_fingerprint, write_record

    ddir = dataset_dir_of(manifest)
    ds = manifest.get("dataset") or ddir.name
    run_id = new_run_id(f"ingest-{ds}")
    rows = manifest.get("rows") or {}
    arts = [{"kind": f"table/{p.stem}", "path": str(p), "rows": rows.get(p.stem), "sha256": sha256_file(p)}
            for p in sorted(ddir.glob("*.parquet"))]
    arts.append({"kind": "manifest", "path": str(ddir / "manifest.json"), "rows": None,
                 "sha256": sha256_file(ddir / "manifest.json")})
    record = {
        "run": {"run_id": run_id, "flow": "ingest", "task": "ingest", "method": None, "params": params,
                "code_version": code_version(), "data_fingerprints": {ds: data_fingerprint(ddir)}, "seed": None,
                "started_at": started_at, "finished_at": utcnow().isoformat(), "status": "completed",
                "device": device_info()},
        "metrics_path": None,
        "artifacts": arts,
    }
    return str(write_record(config.runs_dir() / run_id, record))


def failed_ingest_record(params: dict[str, Any], exc: BaseException, started_at: str) -> str:
    """The run record of an ingest that failed (status ``failed``, a one-line reason, the traceback in
    ``runs/<run_id>/error.txt``), for the publish task to land. A plain function, not a task: it is
    called in the flow's failure path with the exception, after the task's last retry."""
    from eventatlas.records import fail_record, new_record
    from eventatlas.runinfo import new_run_id

    from .common import write_record

    ds = params.get("dataset") or params.get("name") or "unknown"
    run_id = new_run_id(f"ingest-{ds}")
    run_dir = config.runs_dir() / run_id
    record = new_record(run_id, flow="ingest", task="ingest", params=params, started_at=started_at)
    fail_record(record, exc, run_dir)
    return str(write_record(run_dir, record))
