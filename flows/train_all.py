"""``train-all``: every method x every dataset it applies to x every seed, published to the warehouse."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from eventatlas import config
from eventatlas.data import ingested
from eventatlas.device import resolve_device
from eventatlas.methods import get_spec, validate_params
from tasks.publish import publish_task, summarize_task
from tasks.report import report_task
from tasks.train import train_task


def plan(methods: list[str], datasets: list[str] | None) -> list[tuple[str, str]]:
    """(method, dataset) cells: the named datasets, else every ingested dataset whose kinds the
    method's spec applies to."""
    available = ingested()
    if datasets:
        missing = [d for d in datasets if d not in available]
        if missing:
            raise ValueError(f"not ingested: {missing} (have {sorted(available)} under {config.datasets_dir()}); "
                             f"run `eventatlas ingest <name> --path ...` first")
        return [(m, d) for m in methods for d in datasets]
    cells = [(m, name) for m in methods for name, man in available.items() if get_spec(m).applies(man.kinds())]
    if not cells:
        raise ValueError(f"no dataset under {config.datasets_dir()} that {methods} apply to: run "
                         f"`eventatlas ingest-samples` or `eventatlas ingest <name> --path ...` first")
    return cells


@flow(name="train-all", log_prints=True)
def train_all(
    datasets: list[str] | None = None,
    methods: list[str] | None = None,
    seeds: list[int] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    device: str = "auto",
    resume: bool = False,
    report: bool = False,
) -> dict[str, Any]:
    """Run each method on each dataset it applies to (or ``datasets``) for each seed.

    ``params`` maps a method name to its typed config (``eventatlas.methods.SPECS[name].config``),
    validated before any task runs, e.g. ``{"untuned": {"representations": ["trigger"]}}``.
    ``device`` (auto | cpu | cuda | cuda:N) applies to every method that does not set its own;
    an unavailable device is refused here. ``resume`` continues killed runs from their checkpoints.
    Each run is published as soon as it finishes (the publish task is the only warehouse writer);
    the flow fails at the end if any run failed, after publishing it. Runs a method declares not
    applicable are published as ``skipped`` with the reason and do not fail the flow.
    ``report`` refreshes the results page ``<data>/report.html`` at the end (failed runs included).
    """
    logger = get_run_logger()
    methods = list(methods or ["untuned"])
    validate_params(params, methods)
    resolve_device(device)
    seeds = [int(s) for s in (seeds or [0])]
    params = dict(params or {})
    cells = plan(methods, datasets)
    available = ingested()
    logger.info("train-all: %d cells (%s) x seeds %s on %s", len(cells), cells, seeds, device)
    records: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    out: dict[str, Any] = {"warehouse": None}
    for method, name in cells:
        for seed in seeds:
            rec = train_task(method, name, seed, params.get(method, {}), str(available[name].path), device=device,
                             resume=resume)
            out = publish_task([rec])
            records.append(rec)
            failed += out["failed"]
            skipped += out["skipped"]
    summarize_task(records)
    summary = {"runs": len(records), "records": records, "failed": failed, "skipped": skipped,
               "warehouse": out["warehouse"]}
    if report:
        summary["report"] = report_task()
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(records)} runs failed (published with status 'failed'): {failed}")
    return summary


if __name__ == "__main__":
    train_all()
