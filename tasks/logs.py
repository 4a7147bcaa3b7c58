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


def _in_run(record: logging.LogRecord) -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return bool(getattr(record, "flow_run_id", None) or FlowRunContext.get() or TaskRunContext.get())


def _plain_api_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers if isinstance(h, APILogHandler) and not isinstance(h, RunLogHandler)]


class RunLogHandler(APILogHandler):
    """Prefect's API log handler, silent outside a flow or task run.

    Prefect's logging setup can run again in a process (an in-process API server, a CLI call) and
    re-attach its own API handler to the ``PREFECT_LOGGING_EXTRA_LOGGERS``: the first record after that
    removes it again, and is sent once (by that handler when it stood first in the list and has already
    sent it, else here)."""

    def emit(self, record: logging.LogRecord) -> None:
        core = logging.getLogger(CORE_LOGGER)
        plain = _plain_api_handlers(core)
        if plain:
            handlers = core.handlers
            before = self in handlers and handlers.index(plain[0]) < handlers.index(self)
            for h in plain:
                core.removeHandler(h)
            if before:
                return
        if _in_run(record):
            super().emit(record)


def route_core_logging(level: int = logging.INFO) -> logging.Logger:
    """Idempotent: the ``eventatlas`` logger at ``level`` (unless set lower) with one ``RunLogHandler``
    (a plain ``APILogHandler`` from ``PREFECT_LOGGING_EXTRA_LOGGERS`` is replaced: one copy per line)."""
    core = logging.getLogger(CORE_LOGGER)
    if core.level == logging.NOTSET or core.level > level:
        core.setLevel(level)
    for h in _plain_api_handlers(core):
        core.removeHandler(h)
    if not any(isinstance(h, RunLogHandler) for h in core.handlers):
        core.addHandler(RunLogHandler())
    return core
