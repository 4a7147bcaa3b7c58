"""One-shot commands: with no Prefect API configured `eventatlas ingest` / `publish` run the core
directly (no temporary Prefect server, Prefect not even imported) and still record the run in the
warehouse through the publish path; with an API configured they go through the Prefect flow."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eventatlas.store.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "datasets" / "samples" / "maven" / "train.jsonl"


@pytest.fixture
def clean_env(eventatlas_env, monkeypatch):
    for k in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH", "EVENTATLAS_PREFECT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(eventatlas_env / "prefect-home"))
    return eventatlas_env


def test_use_prefect_follows_the_configured_api(clean_env, monkeypatch):
    from eventatlas.cli.base import prefect_api_configured, use_prefect

    assert not prefect_api_configured() and not use_prefect()
    home = clean_env / "prefect-home"
    home.mkdir()
    (home / "profiles.toml").write_text(textwrap.dedent("""
        active = "local"
        [profiles.local]
        PREFECT_API_URL = "http://127.0.0.1:4200/api"
        [profiles.ephemeral]
        PREFECT_SERVER_ALLOW_EPHEMERAL_MODE = "true"
    """), encoding="utf-8")
    assert prefect_api_configured() and use_prefect()  # the active profile names a server
    monkeypatch.setenv("PREFECT_PROFILE", "ephemeral")
    assert not prefect_api_configured()
    monkeypatch.setenv("PREFECT_API_URL", "http://elsewhere:4200/api")
    assert use_prefect()
    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    assert not use_prefect()
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("EVENTATLAS_PREFECT", "always")
    assert use_prefect()


PROBE = textwrap.dedent("""
    import sys
    from eventatlas.cli import app
    try:
        app(sys.argv[1:])
    except SystemExit as e:
        code = e.code
    print("PREFECT_IMPORTED" if "prefect" in sys.modules else "NO_PREFECT", "TORCH" if "torch" in sys.modules else "NO_TORCH")
    sys.exit(code)
""")


def test_ingest_without_api_runs_directly_and_records_the_run(clean_env):
    env = {**os.environ}
    r = subprocess.run([sys.executable, "-c", PROBE, "ingest", "maven", "--path", str(SAMPLE), "--dataset", "m"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ingested m ->" in r.stdout and "mentions': 13" in r.stdout
    assert "NO_PREFECT NO_TORCH" in r.stdout  # no temporary server, no torch import at start-up
    assert not (clean_env / "prefect-home" / "prefect.db").exists()
    runs = Warehouse().query("SELECT run_id, flow, task, status, data_fingerprints, device FROM runs")
    assert runs.flow.tolist() == ["ingest"] and runs.status.tolist() == ["completed"]
    assert '"m"' in runs.data_fingerprints[0] and runs.device[0].startswith("cpu:")
    arts = Warehouse().query("SELECT kind, \"rows\" FROM artifacts ORDER BY kind")
    assert dict(zip(arts.kind, arts.rows))["table/mentions"] == 13
    # bad input on the direct path: the same one-line error and exit code 2
    bad = clean_env / "empty.jsonl"
    bad.write_text("", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "ingest", "maven", "--path", str(bad),
                        "--dataset", "m"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    # ... and, as through the flow, a failed-run record with the one-line reason (nothing else landed)
    runs = Warehouse().query("SELECT status, error FROM runs ORDER BY started_at")
    assert runs.status.tolist() == ["completed", "failed"] and "empty.jsonl" in runs.error[1]


def test_ingest_with_an_api_goes_through_the_prefect_flow(clean_env, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness
    from typer.testing import CliRunner

    from eventatlas.cli import app

    with prefect_test_harness(server_startup_timeout=120):
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())  # "an API is configured"
        r = CliRunner().invoke(app, ["ingest", "maven", "--path", str(SAMPLE), "--dataset", "viaflow"])
        assert r.exit_code == 0, r.output
        with get_client(sync_client=True) as client:
            names = [client.read_flow(fr.flow_id).name for fr in client.read_flow_runs()]
    assert "ingest" in names
    runs = Warehouse().query("SELECT flow, status, data_fingerprints FROM runs")
    assert runs.flow.tolist() == ["ingest"] and '"viaflow"' in runs.data_fingerprints[0]


def test_direct_ingest_retries_a_transient_download_failure_like_the_task(clean_env, monkeypatch):
    import eventatlas.data.ingest as core
    from eventatlas.cli import data as cli
    from eventatlas.data.download import DownloadFailed

    calls, slept = [], []
    real = core.ingest

    def flaky(name, path, **kw):
        calls.append(kw["download"])
        if len(calls) < 3:
            raise DownloadFailed("HTTP 503 from the mirror", transient=True)
        return real(name, SAMPLE, dataset=kw["dataset"])

    monkeypatch.setattr(core, "ingest", flaky)
    # time.sleep is process-wide: background threads (Prefect's services left by the test before, HTTP
    # servers) keep their real sleep, and only this thread's sleeps are recorded (and skipped)
    import threading
    import time

    real_sleep, me = time.sleep, threading.get_ident()
    monkeypatch.setattr("time.sleep", lambda s: slept.append(s) if threading.get_ident() == me else real_sleep(s))
    man = cli._ingest_here("maven", None, True, "dl", None)
    assert man["dataset"] == "dl" and len(calls) == 3 and slept == [10, 30]
    calls.clear()
    monkeypatch.setattr(core, "ingest", lambda *a, **k: (_ for _ in ()).throw(DownloadFailed("bad sum", transient=False)))
    with pytest.raises(DownloadFailed, match="bad sum"):  # final: no retry
        cli._ingest_here("maven", None, True, "dl2", None)
    assert slept == [10, 30]
