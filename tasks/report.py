"""Report task: write the results page from the warehouse and link it from the Prefect run."""
from __future__ import annotations

from prefect import get_run_logger, task


@task(name="report")
def report_task(out: str | None = None) -> str:
    """``out`` default ``<data>/report.html``; returns the path written."""
    from eventatlas import config
    from eventatlas.results.report import write_report

    path = write_report(out or config.data_root() / "report.html")
    get_run_logger().info("results report written to %s", path)
    try:
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(key="results-report", markdown=f"Results report: `{path}` (open it in a browser)",
                                 description="eventatlas report")
    except Exception as e:  # an artifact is a convenience; the file is the result
        get_run_logger().warning("no Prefect artifact for the report: %s", e)
    return str(path)


@task(name="experiment-page")
def experiment_page_task(name: str, markdown: str) -> None:
    """The experiment's table, goal and verdict as a markdown artifact of the flow run."""
    from prefect.artifacts import create_markdown_artifact

    create_markdown_artifact(key=f"experiment-{name}".replace("_", "-").lower(), markdown=markdown,
                             description=f"experiment {name}: table and goal verdict")
