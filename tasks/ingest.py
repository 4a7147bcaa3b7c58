"""Ingest task: one reader into one dataset directory (retries only transient download failures)."""
from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task


@task(name="ingest", task_run_name="ingest-{name}")
def ingest_task(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
                opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Returns the manifest plus ``dataset_dir`` (where the tables landed)."""
    from eventatlas.data.ingest import ingest_dataset

    out = ingest_dataset(name, path, download, dataset, opts)
    how = "downloaded to" if out.get("download") else "from"
    get_run_logger().info("ingested %s %s %s: rows=%s rejects=%s", out["dataset"], how, out.get("source") or path,
                          out.get("rows"), out.get("rejects"))
    return out


def transient_failure(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry only a download that failed for a reason that may pass
    (connection errors, 429, 5xx). A checksum refusal, a missing checksum or bad input is final."""
    from eventatlas.data.download import DownloadFailed

    exc = state.data if isinstance(state.data, BaseException) else state.result(raise_on_failure=False)
    return isinstance(exc, DownloadFailed) and exc.transient


def ingest_task_for(download: bool):
    """Network tasks retry transient failures (after the downloader's own retries); the rest fails fast."""
    if not download:
        return ingest_task
    from eventatlas.data.download import TRANSIENT_RETRY_DELAYS

    return ingest_task.with_options(retries=len(TRANSIENT_RETRY_DELAYS), retry_delay_seconds=list(TRANSIENT_RETRY_DELAYS),
                                    retry_condition_fn=transient_failure)
