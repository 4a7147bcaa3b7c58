"""The core's progress logging reaches a flow run's logs in the Prefect API (what `prefect deployment
run ... --watch` and the UI show), and stays silent outside a run."""
from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.tiny_models import tiny_bert

from eventatlas import config

REPO = Path(__file__).resolve().parents[2]


def _flow_logs(flow_run_id) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    # the API log worker sends in batches: wait until everything queued has been sent. Not
    # APILogHandler().flush(): it gives up after 5 s, which a loaded machine can pass, and the lines
    # not yet sent would then be missing below.
    APILogWorker.drain_all(timeout=120)

    async def read():
        async with get_client() as c:
            return await c.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))

    return asyncio.run(read())


def test_embed_flow_run_logs_hold_the_core_progress_lines(eventatlas_env, tmp_path, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    from eventatlas.data.ingest import ingest

    man = ingest("ontoevent", config.samples_dir() / "ontoevent")
    sentences = pq.read_table(Path(man["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
    model = tiny_bert(tmp_path, sentences)
    from flows.embed import embed

    with prefect_test_harness(server_startup_timeout=180):
        state = embed(man["dataset"], ["trigger"], str(model), {"batch_size": 8, "precision": "fp32"},
                      return_state=True)
        assert state.is_completed()
        logs = _flow_logs(state.state_details.flow_run_id)
    core = [(lg.name, lg.level, lg.message) for lg in logs if lg.name.startswith("eventatlas")]
    n = man["rows"]["mentions"]
    # eventatlas.modeling.encode's INFO lines: the job and its end (rows, time), once each (one handler)
    starts = [m for name, lvl, m in core if name == "eventatlas.modeling.encode" and m.startswith(f"embedding {n} mentions")]
    ends = [m for name, lvl, m in core if name == "eventatlas.modeling.encode" and f": {n} mentions in " in m]
    assert len(starts) == 1 and len(ends) == 1, core
    assert {lvl for _, lvl, _ in core} >= {logging.INFO}
    # the task's own line is there too, so the core lines sit beside Prefect's
    assert any("embedded" in lg.message for lg in logs if lg.name.startswith("prefect.task_runs"))


def test_core_logging_outside_a_run_is_silent():
    import flows  # noqa: F401  (routes the core's logging)
    from tasks.logs import RunLogHandler

    core = logging.getLogger("eventatlas")
    assert core.level == logging.INFO
    assert [type(h) for h in core.handlers].count(RunLogHandler) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Prefect's plain API handler warns outside a run
        logging.getLogger("eventatlas.modeling.encode").info("progress outside any run")


def test_extra_loggers_setting_gives_one_handler(tmp_path):
    """With PREFECT_LOGGING_EXTRA_LOGGERS=eventatlas (the CLI's and prefect.yaml's setting) Prefect
    attaches its own API handler too: it is replaced, not doubled."""
    code = ("import logging, flows; from prefect.logging.handlers import APILogHandler; "
            "print(sum(isinstance(h, APILogHandler) for h in logging.getLogger('eventatlas').handlers))")
    env = {**os.environ, "PREFECT_LOGGING_EXTRA_LOGGERS": "eventatlas", "PREFECT_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


@pytest.mark.parametrize("plain_first", [False, True])
def test_a_re_attached_prefect_handler_is_dropped_and_each_record_sent_once(monkeypatch, plain_first):
    """Prefect's logging setup, run again in a process, re-attaches its plain API handler to the
    EXTRA_LOGGERS: one record is still sent once, and the plain handler is gone afterwards."""
    import flows  # noqa: F401
    import tasks.logs as logs
    from prefect.logging.handlers import APILogHandler

    sent: list[str] = []
    monkeypatch.setattr(APILogHandler, "emit", lambda self, record: sent.append(record.getMessage()))
    monkeypatch.setattr(logs, "_in_run", lambda record: True)
    core = logging.getLogger("eventatlas")
    plain = APILogHandler()
    monkeypatch.setattr(core, "handlers", [plain, *core.handlers] if plain_first else [*core.handlers, plain])
    logging.getLogger("eventatlas.modeling.encode").info("embedding 3 mentions")
    assert sent == ["embedding 3 mentions"]
    assert [type(h) for h in core.handlers] == [logs.RunLogHandler]
    logging.getLogger("eventatlas.modeling.encode").info("next")
    assert sent == ["embedding 3 mentions", "next"]
