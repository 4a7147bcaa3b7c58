"""The download path end to end: `eventatlas ingest maven --download` against a local HTTP server
(127.0.0.1, a thread in the test) serving a fake three-file release (the MAVEN sample files)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.data import registry
from eventatlas.cli import app
from eventatlas.data.download import (ChecksumError, ChecksumRequired, DownloadFailed, fetch, parse_sha256_args,
                                 parse_sha256_file)
from tasks.ingest import transient_failure

FILES = ("train.jsonl", "valid.jsonl", "test.jsonl")
REPO = Path(__file__).resolve().parents[2]


class _Release(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    requests: list[str] = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        self.requests.append(path)
        body = self.files.get(path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def release(tmp_path, monkeypatch, eventatlas_env):
    """A served fake MAVEN release and a registry whose maven download points at it."""
    data = {n: (config.samples_dir() / "maven" / n).read_bytes() for n in FILES}
    _Release.files = {f"/{n}": b for n, b in data.items()}
    _Release.requests = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Release)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    doc = yaml.safe_load(registry.REGISTRY_YAML.read_text(encoding="utf-8"))
    doc["datasets"]["maven"]["download"]["files"] = {n: {"url": f"{base}/{n}?dl=1", "sha256": "unverified"}
                                                      for n in FILES}
    reg = tmp_path / "registry.yaml"
    reg.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(registry, "REGISTRY_YAML", reg)
    yield SimpleNamespace(base=base, registry=reg, sums={n: hashlib.sha256(b).hexdigest() for n, b in data.items()})
    srv.shutdown()
    srv.server_close()


def test_parse_sha256_file_formats_and_errors(tmp_path):
    h = [hashlib.sha256(bytes([i])).hexdigest() for i in range(3)]
    f = tmp_path / "SHA256SUMS"
    f.write_text(f"# pinned 2026-11\n{h[0]}  train.jsonl\n{h[1].upper()} *MAVEN/valid.jsonl\n\n"
                 f"SHA256 (test.jsonl) = {h[2]}\n", encoding="utf-8")
    assert parse_sha256_file(f) == {"train.jsonl": h[0], "valid.jsonl": h[1], "test.jsonl": h[2]}
    f.write_text(f"{h[0]}  train.jsonl\n{h[1][:60]}  valid.jsonl\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"SHA256SUMS: line 2: expected 'SHA256  FILENAME'"):
        parse_sha256_file(f)
    # per-file entries override the file; a bare sum only alone
    f.write_text(f"{h[0]}  train.jsonl\n", encoding="utf-8")
    assert parse_sha256_args([f"train.jsonl={h[1]}", f"test.jsonl={h[2]}"], f) == {"train.jsonl": h[1], "test.jsonl": h[2]}
    assert parse_sha256_args([h[0]]) == h[0]
    with pytest.raises(ValueError, match="one-file dataset"):
        parse_sha256_args([h[0]], f)


def test_checksums_settled_before_any_request(release, tmp_path):
    one = release.sums["train.jsonl"]
    with pytest.raises(ChecksumRequired, match=r"maven has 3 files \(train.jsonl, valid.jsonl, test.jsonl\)"):
        fetch("maven", tmp_path / "dl", sha256=one)
    with pytest.raises(ChecksumRequired, match="does not have: nope.jsonl"):
        fetch("maven", tmp_path / "dl", sha256={"nope.jsonl": one})
    with pytest.raises(ChecksumRequired, match="no verified sha256 for valid.jsonl, test.jsonl"):
        fetch("maven", tmp_path / "dl", sha256={"train.jsonl": one})
    assert _Release.requests == []


def test_ingest_download_with_sha256_file(release, tmp_path):
    sums = tmp_path / "maven.sha256"
    sums.write_text("".join(f"{h}  {n}\n" for n, h in release.sums.items()), encoding="utf-8")
    r = CliRunner().invoke(app, ["ingest", "maven", "--download", "--sha256-file", str(sums)])
    assert r.exit_code == 0, r.output
    man = json.loads((config.datasets_dir() / "maven" / "manifest.json").read_text())
    assert man["rows"]["mentions"] == 20
    assert man["download"] == {"sha256": release.sums, "verified": {n: True for n in FILES}}
    assert sorted(_Release.requests) == sorted(f"/{n}" for n in FILES)
    assert "without checksum verification" not in r.output
    # the run record of the ingest landed in the warehouse
    from eventatlas.store.warehouse import Warehouse

    _, rows = Warehouse().query_rows("SELECT status, params->>'download' FROM runs WHERE flow = 'ingest'")
    assert rows == [("completed", "true")]


def test_insecure_download_prints_the_computed_sums(release):
    r = CliRunner().invoke(app, ["ingest", "maven", "--download", "--insecure-skip-checksum"])
    assert r.exit_code == 0, r.output
    printed = dict(line.split("  ")[::-1] for line in r.output.splitlines() if len(line.split("  ")[0]) == 64)
    assert printed == release.sums  # pinnable: exactly what sha256sum prints for the served files


def test_checksum_refusal_is_final_one_line_and_fast(release, tmp_path):
    """A wrong per-file sum: each file fetched at most once (no Prefect retry), one line on the
    terminal, no retry delays."""
    bad = {**release.sums, "valid.jsonl": "0" * 64}
    args = ["ingest", "maven", "--download"] + [f"--sha256={n}={h}" for n, h in bad.items()]
    code = ("import sys; from pathlib import Path; import eventatlas.data.registry as r; "
            f"r.REGISTRY_YAML = Path({str(release.registry)!r}); from eventatlas.cli import app; "
            f"sys.argv = ['eventatlas'] + {args!r}; app()")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "COLUMNS": "300"})
    took = time.perf_counter() - t0
    out = (p.stdout + p.stderr).strip().splitlines()
    assert p.returncode != 0
    assert len(out) == 1 and "checksum mismatch" in out[0] and "valid.jsonl" in out[0], out
    assert _Release.requests.count("/valid.jsonl") == 1  # not retried (Prefect's retries would wait 10+30+90 s)
    assert took < 60, took  # process start + ephemeral Prefect API; on a shared 2-core machine up to ~15 s
    assert not (config.datasets_dir() / "maven").exists()  # nothing ingested


def test_retry_condition_only_transient():
    state = lambda e: SimpleNamespace(data=e)  # noqa: E731 - Prefect hands a Failed state holding the exception
    assert transient_failure(None, None, state(DownloadFailed("503", transient=True)))
    assert not transient_failure(None, None, state(DownloadFailed("404", transient=False)))
    assert not transient_failure(None, None, state(ChecksumError("mismatch")))
    assert not transient_failure(None, None, state(ChecksumRequired("none")))


def test_missing_or_ambiguous_sums_refused_before_prefect(release, monkeypatch):
    """Settled in the CLI itself: no flow starts, no request is made."""
    from eventatlas.cli import data as cli

    # neither way to run the ingest (a Prefect flow, or directly) is even asked about: proven by the
    # calls themselves rather than by a wall-clock bound that a loaded machine could exceed
    started = []
    monkeypatch.setattr(cli, "use_prefect", lambda *a, **k: started.append("use_prefect") or False)
    monkeypatch.setattr(cli, "_ingest_here", lambda *a, **k: started.append("_ingest_here"))
    one = release.sums["train.jsonl"]
    for args, msg in ((["--sha256", one], "maven has 3 files"),
                      ([], "no verified sha256 for train.jsonl, valid.jsonl, test.jsonl"),
                      ([f"--sha256=nope.jsonl={one}"], "does not have: nope.jsonl")):
        r = CliRunner().invoke(app, ["ingest", "maven", "--download", *args])
        assert r.exit_code == 2 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert started == [] and _Release.requests == []
