"""Thin Prefect tasks around the eventatlas core (the core itself never imports Prefect)."""

from tasks.logs import route_core_logging as _route_core_logging  # noqa: E402

_route_core_logging()  # the core's INFO progress lines reach the flow/task run logs (tasks/logs.py)
