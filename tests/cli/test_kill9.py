"""kill -9 of a CLI process running a flow: the temporary Prefect API server dies with it (no orphan
listening on 127.0.0.1), and the next start marks the flow run whose process is gone as CRASHED.
Real processes, a real SIGKILL, bounded waits."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flows.runtime import _process_start_ticks, pid_tag, process_gone

REPO = Path(__file__).resolve().parents[2]

SLEEPER = textwrap.dedent("""
    import json, os, sys, time
    from prefect import flow, task
    from flows.runtime import guarded, temporary_server_pid

    @task
    def nap(path):
        from prefect.runtime import flow_run
        json.dump({"pid": os.getpid(), "server": temporary_server_pid(), "flow_run": flow_run.id}, open(path + ".tmp", "w"))
        os.replace(path + ".tmp", path)
        time.sleep(600)

    @flow(name="sleepy")
    def sleepy(path):
        nap(path)

    with guarded():
        sleepy(sys.argv[1])
""")

NEXT_START = textwrap.dedent("""
    import json, sys
    from prefect.client.orchestration import get_client
    from flows.runtime import guarded

    said = []
    with guarded(said.append):
        pass
    with get_client(sync_client=True) as c:
        fr = c.read_flow_run(sys.argv[1])
        trs = c.read_task_runs()
        print(json.dumps({"state": fr.state.type.value, "message": fr.state.message, "said": said,
                          "tags": fr.tags, "tasks": [t.state.type.value for t in trs]}))
""")


def test_pid_tags_tell_live_gone_and_reused_processes():
    me = pid_tag()
    assert process_gone(me) is False
    host, pid, ticks = me.split(":")[1:]
    assert process_gone(f"eventatlas-pid:{host}:{pid}:{int(ticks) + 1}") is True  # pid reused by another process
    assert process_gone(f"eventatlas-pid:{host}:99999999:1") is True
    assert process_gone(f"eventatlas-pid:otherhost:{pid}:{ticks}") is None  # cannot tell from here


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
@pytest.mark.timeout(400)
def test_kill9_takes_the_temporary_server_along_and_the_run_is_marked_crashed(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PYTHONPATH=str(REPO), PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    info = tmp_path / "info.json"
    p = subprocess.Popen([sys.executable, "-c", SLEEPER, str(info)], env=env, cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 200
        while not info.exists():
            assert p.poll() is None, p.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the flow did not start in 200 s"
            time.sleep(0.2)
        got = json.loads(info.read_text())
        assert got["pid"] == p.pid and got["server"]
        assert _process_start_ticks(got["server"]) is not None  # the temporary server runs
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _process_start_ticks(got["server"]) is not None:
            assert time.monotonic() < deadline, f"temporary server {got['server']} outlived its killed parent"
            time.sleep(0.2)
    finally:
        if p.poll() is None:
            p.kill()
    r = subprocess.run([sys.executable, "-c", NEXT_START, got["flow_run"]], env=env, cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["state"] == "CRASHED" and f"pid {p.pid}" in out["message"]
    assert "eventatlas-cli" in out["tags"]
    assert any(got["flow_run"] in s and "marked crashed" in s for s in out["said"])
    assert out["tasks"] == ["CRASHED"]  # its running task run too
