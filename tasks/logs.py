"""The core's progress logging in Prefect's run logs (``--watch``, the UI).

The core logs through the standard ``eventatlas`` logger and never imports Prefect. Prefect's
``PREFECT_LOGGING_EXTRA_LOGGERS=eventatlas`` attaches its API handler to that logger but leaves the
logger's level unset, so the root level (WARNING) dropped every INFO progress line, and outside a run
the plain handler warns on each record. ``route_core_logging()`` (called when ``flows`` or ``tasks`` is
imported: every process that runs a flow or a task) sets the ``eventatlas`` logger to INFO (unless set
lower) and gives it one handler that sends a record to the API only inside a flow or task run, and
drops it silently elsewhere (Prefect-free one-shot commands, plain scripts). Records still propagate
to the root logger, whose console handler the CLI's verbosity controls.
"""
from __future__ import annotations

import logging

from prefect.logging.handlers import APILogHandler

CORE_LOGGER = "eventatlas"


class RunLogHandler(APILogHandler):
    """Prefect's API log handler, silent outside a flow or task run."""

    def emit(self, record: logging.LogRecord) -> None:
        from prefect.context import FlowRunContext, TaskRunContext

        if getattr(record, "flow_run_id", None) or FlowRunContext.get() or TaskRunContext.get():
            super().emit(record)


def route_core_logging(level: int = logging.INFO) -> logging.Logger:
    """Idempotent: the ``eventatlas`` logger at ``level`` (unless set lower) with one ``RunLogHandler``
    (a plain ``APILogHandler`` from ``PREFECT_LOGGING_EXTRA_LOGGERS`` is replaced: one copy per line)."""
    core = logging.getLogger(CORE_LOGGER)
    if core.level == logging.NOTSET or core.level > level:
        core.setLevel(level)
    for h in list(core.handlers):
        if isinstance(h, APILogHandler) and not isinstance(h, RunLogHandler):
            core.removeHandler(h)
    if not any(isinstance(h, RunLogHandler) for h in core.handlers):
        core.addHandler(RunLogHandler())
    return core
