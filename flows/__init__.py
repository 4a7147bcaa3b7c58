"""Prefect flows composing the tasks in ``tasks/``. Flow names: ingest, embed, cluster, evaluate, train-all, publish, build-wikievents."""

from tasks.logs import route_core_logging as _route_core_logging  # noqa: E402

_route_core_logging()  # the core's INFO progress lines reach the flow/task run logs (tasks/logs.py)
