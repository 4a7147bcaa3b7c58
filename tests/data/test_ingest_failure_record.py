"""A failed ingest leaves a run record: status failed, a one-line reason in the warehouse (`eventatlas
runs`), the traceback in the run's directory; a successful one is listed beside it."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.cli import app
from eventatlas.store.warehouse import Warehouse


@pytest.mark.parametrize("prefect", ["never", "always"])  # the CLI's direct path and the ingest flow
def test_failed_ingest_is_recorded_with_one_line_reason(eventatlas_env, tmp_path, monkeypatch, prefect):
    monkeypatch.setenv("EVENTATLAS_PREFECT", prefect)
    bad = tmp_path / "train.jsonl"
    bad.write_text('{"id": "d1", "title": "t", "content": [\n', encoding="utf-8")  # cut-off JSON
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", "maven", "--path", str(bad)], terminal_width=300)
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1 and "train.jsonl" in r.output  # the CLI's one line
    ok = runner.invoke(app, ["ingest", "ontoevent", "--path", str(config.samples_dir() / "ontoevent")])
    assert ok.exit_code == 0, ok.output

    runs = Warehouse().query("SELECT run_id, flow, task, status, error, params FROM runs WHERE flow = 'ingest' "
                             "ORDER BY started_at")
    assert runs.status.tolist() == ["failed", "completed"]
    failed = runs.iloc[0]
    assert failed.run_id.startswith("ingest-maven-") and failed.task == "ingest"
    assert '"name": "maven"' in failed.params and str(bad) in failed.params
    (line,) = failed.error.splitlines()  # one line: type, first line of the message, where the traceback is
    assert line.startswith("InputError: ") and "train.jsonl" in line
    tb = Path(line.rsplit("(traceback: ", 1)[1].rstrip(")"))
    assert tb == config.runs_dir() / failed.run_id / "error.txt"
    text = tb.read_text(encoding="utf-8")
    assert text.startswith("Traceback (most recent call last):") and "InputError" in text.splitlines()[-1]
    arts = Warehouse().query("SELECT kind, path FROM artifacts WHERE run_id = ?", [failed.run_id])
    assert arts.to_dict("records") == [{"kind": "traceback", "path": str(tb)}]
    assert not (config.datasets_dir() / "maven").exists()  # nothing ingested

    # the runs listing shows both, newest first, and filters
    listing = runner.invoke(app, ["runs", "--flow", "ingest"], terminal_width=400)
    assert listing.exit_code == 0, listing.output
    out = listing.output
    assert out.index("ingest-ontoevent_maven-") < out.index("ingest-maven-")  # run ids (folded in narrow tables)
    assert out.index("completed") < out.index("failed") and "InputError:" in out
    only = runner.invoke(app, ["runs", "--status", "failed"])
    assert "ingest-maven-" in only.output and "completed" not in only.output
