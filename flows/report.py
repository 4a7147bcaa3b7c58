"""``report``: the results page (``eventatlas report``) as a flow, e.g. after ``train-all``."""
from __future__ import annotations

from prefect import flow

from tasks.report import report_task


@flow(name="report")
def report(out: str | None = None) -> str:
    """Write the self-contained HTML results page (default ``<data>/report.html``)."""
    return report_task(out)


if __name__ == "__main__":
    report()
