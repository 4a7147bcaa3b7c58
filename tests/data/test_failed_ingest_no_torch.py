"""A failed ingest never imports torch (it cost 2.3 s and 394 MB per error): checked in a fresh process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from eventatlas.cli import app
try:
    app(["ingest", "maven", "--path", sys.argv[1]])
except SystemExit as e:
    print("exit", e.code)
print("torch" in sys.modules)
"""


def test_failed_ingest_does_not_import_torch(tmp_path):
    bad = tmp_path / "train.jsonl"
    bad.write_text("{not json\n")
    env = {**os.environ, "EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "EVENTATLAS_PREFECT": "never", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", PROBE, str(bad)], env=env, capture_output=True, text=True, timeout=120)
    assert "train.jsonl:line 1: invalid JSON" in r.stderr, r.stderr
    assert r.stdout.split()[-3:] == ["exit", "2", "False"], r.stdout + r.stderr
    # the failure was recorded as a failed run (the path that imported torch)
    records = list((tmp_path / "data").rglob("run.json"))
    assert len(records) == 1 and '"status": "failed"' in records[0].read_text()
