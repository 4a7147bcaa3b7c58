"""``publish``: land run records written outside a flow (e.g. ``eventatlas train``, ``eventatlas ensemble``)
in the warehouse through the publish task, the one warehouse writer."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.tracking.records import find_records
from tasks.publish import publish_task


@flow(name="publish")
def publish(paths: list[str], warehouse_path: str | None = None, data_root: str | None = None) -> dict[str, Any]:
    """``paths``: run.json files, run directories, or directories searched recursively for run.json."""
    records = [str(p) for p in find_records(paths)]
    out = publish_task(records, warehouse_path, data_root)
    return {**out, "records": records}


if __name__ == "__main__":
    import sys

    print(publish(sys.argv[1:]))
