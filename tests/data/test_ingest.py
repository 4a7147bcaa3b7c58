from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import shared_path

from eventatlas import config
from eventatlas.data.download import ChecksumError, ChecksumRequired, download, fetch_dataset
from eventatlas.data.ingest import ingest, ingest_samples, list_ingested
from eventatlas.errors import InputError
from eventatlas.readers import REGISTRY
from eventatlas.data.registry import dataset_entry, load_registry
from eventatlas.schema import SCHEMA_VERSION, TABLES


def check_mentions(path: Path) -> int:
    t = pq.read_table(path / "mentions.parquet").to_pylist()
    for m in t:
        assert m["sentence"][m["trigger_start"] : m["trigger_end"]] == m["trigger"], m
    assert len({m["mention_id"] for m in t}) == len(t)
    return len(t)


def test_registry_covers_every_reader():
    reg = load_registry()
    assert set(reg) == set(REGISTRY)
    for name, e in reg.items():
        assert REGISTRY[name] == f"eventatlas.readers.{e.get('reader') or name}", name
        assert (config.samples_dir() / e["sample"]).exists(), name
        assert {"path", "language", "ontology", "labels", "download", "dataset"} <= set(e)
    for f in reg["maven"]["download"]["files"].values():
        assert f["url"].startswith("https://cloud.tsinghua.edu.cn/") and f["sha256"] == "unverified"
    assert dataset_entry("maven", reg) is reg["maven"]
    assert dataset_entry("no_such_reader", reg) == {}  # a reader may exist without an entry
    with pytest.raises(KeyError, match="'no_such_reader' is not in the registry; known: .*maven"):
        dataset_entry("no_such_reader", reg, required=True)


def test_registry_bad_file_and_no_import_cycle(tmp_path):
    bad = tmp_path / "registry.yaml"
    bad.write_text("datasets: [maven, ace2005]\n")
    with pytest.raises(ValueError, match="top-level 'datasets:' mapping"):
        load_registry(bad)
    # download must not need ingest (the old cycle): importing it alone leaves ingest unloaded
    import subprocess
    import sys

    code = "import sys, eventatlas.data.download; print('eventatlas.data.ingest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.shared_data
def test_ingest_real_ontoevent_default_path(eventatlas_env):
    shared_path("ontoevent_maven", "event_relation.json")
    m = ingest("ontoevent")
    out = config.datasets_dir() / "ontoevent_maven"
    assert m["dataset"] == "ontoevent_maven" and m["reader"] == "ontoevent" and m["schema_version"] == SCHEMA_VERSION
    assert m["rows"]["mentions"] == 5003 and m["rows"]["mention_relations"] == 3289 and m["rejects"] == {}
    assert len(m["fingerprint"]) == 16 and m["ingested_at"].endswith("+00:00")
    assert json.loads((out / "manifest.json").read_text())["rows"] == m["rows"]
    assert check_mentions(out) == 5003
    assert [x["dataset"] for x in list_ingested()] == ["ontoevent_maven"]


def test_ingest_samples_and_list(eventatlas_env):
    mans = ingest_samples()
    assert len(mans) == len(load_registry())
    for m in mans:
        assert sum(m["rows"].values()) > 0 and m["dataset"].endswith("_sample") and m["rejects"] == {}, m
        out = Path(m["path"])
        assert set(p.name for p in out.iterdir()) == {f"{t}.parquet" for t in TABLES} | {"manifest.json"}
        if m["rows"]["mentions"]:
            assert check_mentions(out) == m["rows"]["mentions"]
    listed = {x["dataset"]: x for x in list_ingested()}
    assert set(listed) == {m["dataset"] for m in mans}
    assert listed["hard_similarity_sample"]["rows"]["event_pairs"] == 6


def test_rejects_table_and_counts(eventatlas_env, tmp_path):
    docs = [json.loads(l) for l in (config.samples_dir() / "wikievents" / "dev.jsonl").open()]
    docs[0]["event_mentions"][0]["trigger"]["text"] = "detonated"
    p = tmp_path / "dev.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in docs))
    m = ingest("wikievents", p, dataset="we_bad")
    assert m["rejects"] == {"offset_mismatch": 1} and m["rows"]["rejects"] == 1 and m["rows"]["mentions"] == 6
    rj = pq.read_table(config.datasets_dir() / "we_bad" / "rejects.parquet").to_pylist()
    assert rj[0]["reason"] == "offset_mismatch" and rj[0]["location"] == "line 1 event_mentions[0]" and rj[0]["source"].endswith("dev.jsonl")


def test_failed_ingest_keeps_previous_tables(eventatlas_env, tmp_path):
    out = tmp_path / "ds"
    first = ingest("wikievents", config.samples_dir() / "wikievents", out_dir=out, dataset="we")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    good = (config.samples_dir() / "wikievents" / "dev.jsonl").read_text()
    bad = tmp_path / "dev.jsonl"
    bad.write_text(good + good + '{"doc_id": "x", "tokens": [\n')  # fails after many rows were streamed
    with pytest.raises(InputError, match=r"dev.jsonl:line 5: invalid JSON"):
        ingest("wikievents", bad, out_dir=out, dataset="we")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # same files, same bytes, no temp leftovers
    assert list_ingested(tmp_path)[0]["rows"] == first["rows"]
    # a first ingest that fails leaves no dataset at all
    with pytest.raises(InputError):
        ingest("wikievents", bad, out_dir=tmp_path / "fresh", dataset="we2")
    assert not list(Path(tmp_path / "fresh").glob("*")) and not list_ingested(tmp_path / "fresh")


def test_unknown_reader_and_missing_default_path(eventatlas_env):
    with pytest.raises(KeyError, match="unknown reader"):
        ingest("nope")
    with pytest.raises(ValueError, match="no default path"):
        ingest("ace2005")


# ---- downloads against a local server -------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    cut_once: set[str] = set()
    log: list[tuple[str, str | None]] = []

    def log_message(self, *a):  # keep test output quiet
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        data = self.files.get(path)
        self.log.append((path, self.headers.get("Range"), self.headers.get("User-Agent")))
        if data is None:
            self.send_response(404)
            self.end_headers()
            return
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if path in self.cut_once:  # simulate a dropped connection half-way
            self.cut_once.discard(path)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Handler.files, _Handler.cut_once, _Handler.log = {}, set(), []
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.network
def test_download_resumes_and_verifies(server, tmp_path):
    data = bytes(range(256)) * 4000
    _Handler.files["/big.bin"] = data
    _Handler.cut_once.add("/big.bin")
    dest = download(f"{server}/big.bin", tmp_path / "big.bin", sha256=hashlib.sha256(data).hexdigest(), backoff=0.01, progress=False)
    assert dest.read_bytes() == data and not (tmp_path / "big.bin.part").exists()
    ranges = [r for p, r, _ in _Handler.log]
    # second request resumed from what reached the disk before the connection dropped
    assert ranges[0] is None and len(ranges) == 2 and 0 < int(ranges[1][6:-1]) <= len(data) // 2
    assert all(ua.startswith("eventatlas/") for _, _, ua in _Handler.log)


@pytest.mark.network
def test_download_checksum_mismatch_and_refusal(server, tmp_path):
    _Handler.files["/f.txt"] = b"hello"
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        download(f"{server}/f.txt", tmp_path / "f.txt", sha256="0" * 64, progress=False)
    assert not (tmp_path / "f.txt").exists() and not (tmp_path / "f.txt.part").exists()
    with pytest.raises(ChecksumRequired):
        download(f"{server}/f.txt", tmp_path / "f.txt", progress=False)
    assert not _Handler.log[1:]  # refused before any request
    download(f"{server}/f.txt", tmp_path / "f.txt", insecure_skip_checksum=True, progress=False)
    assert (tmp_path / "f.txt").read_bytes() == b"hello"
    with pytest.raises(RuntimeError, match="404"):
        download(f"{server}/missing", tmp_path / "m", insecure_skip_checksum=True, progress=False, backoff=0.01)


@pytest.mark.network
def test_fetch_registry_dataset_then_ingest(server, tmp_path, eventatlas_env):
    files = {n: (config.samples_dir() / "maven" / n).read_bytes() for n in ("train.jsonl", "valid.jsonl", "test.jsonl")}
    for n, b in files.items():
        _Handler.files[f"/{n}"] = b
    reg = {"maven": {"download": {"files": {n: {"url": f"{server}/{n}?dl=1", "sha256": "unverified"} for n in files}}}}
    with pytest.raises(ChecksumRequired):
        fetch_dataset("maven", tmp_path / "dl", registry=reg)
    sums = {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}
    d = fetch_dataset("maven", tmp_path / "dl", registry=reg, sha256=sums, progress=False)
    m = ingest("maven", d)
    assert m["rows"]["mentions"] == 20 and m["stats"]["negative_triggers"] == 4
