"""Bounded memory: every reader refuses a record (a line, or a file read as one document) past the record
cap in one line, before holding it; an archive may not inflate past its total cap; event-tuple pairs are
capped per document. Each case runs in a forked child whose own peak RSS (os.wait4) is compared with a
trivial child's, with the cap scaled down to 1 MiB and inputs of 12-24 MiB."""
from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from eventatlas import config
from eventatlas.data.ingest import ingest

S = config.samples_dir()
CAP = 1 << 20
BIG = 24 << 20
BUDGET = 48 << 20  # extra peak RSS allowed over a trivial child: a constant times the 1 MiB cap


def _child(fn) -> tuple[dict, int]:
    """(result of fn in a forked child, that child's peak RSS in bytes)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            res = fn()
        except Exception as e:  # noqa: BLE001
            res = {"error": str(e), "type": type(e).__name__}
        os.write(w, json.dumps(res, default=str).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    _, _, usage = os.wait4(pid, 0)
    return json.loads(out), usage.ru_maxrss * 1024


@pytest.fixture
def capped(eventatlas_env, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_MAX_RECORD_BYTES", str(CAP))
    _, base = _child(lambda: {})
    return base


def _ingest(reader, path, **kw):
    def run():
        m = ingest(reader, path, dataset="big", progress=False, **kw)
        return {"rows": m["rows"], "stats": m["stats"]}
    return run


def _big_json_array(f, prefix: bytes, suffix: bytes, n: int = BIG) -> None:
    """A JSON text of about ``n`` bytes: ``prefix`` + many short strings + ``suffix``, written in chunks."""
    f.write(prefix + b'"a"')
    chunk = b', "tok"' * 65536
    for _ in range(n // len(chunk)):
        f.write(chunk)
    f.write(suffix)


LINE_READERS = [
    ("maven", "maven", "train.jsonl", b'{"id": "big", "content": [{"tokens": [', b"]}]}\n"),
    ("wikievents", "wikievents", "dev.jsonl", b'{"doc_id": "big", "tokens": [', b'], "sentences": [], "event_mentions": []}\n'),
    ("framenet_jsonl", "framenet_jsonl", "fulltext_sample_dev.jsonl", b'{"text": "x", "tokens": [', b"]}\n"),
]


@pytest.mark.parametrize("reader,rel,name,pre,post", LINE_READERS)
def test_line_readers_refuse_a_line_past_the_cap_without_holding_it(capped, tmp_path, reader, rel, name, pre, post):
    d = tmp_path / rel
    shutil.copytree(S / rel, d)
    with open(d / name, "ab") as f:
        _big_json_array(f, pre, post)
    n = sum(1 for _ in open(S / rel / name, "rb")) + 1
    res, peak = _child(_ingest(reader, d))
    assert res.get("type") == "InputError" and res["error"] == (
        f"{d / name}:line {n}: record longer than {CAP} bytes (cap EVENTATLAS_MAX_RECORD_BYTES); refused before "
        "reading it whole; raise the cap if the input is trusted")
    assert peak - capped < BUDGET, (peak - capped) >> 20


@pytest.mark.parametrize("reader,rel,sep", [("event_tuples", "event_tuples/tuples_sample.txt", b" <TUP> "),
                                            ("hard_similarity", "event_similarity/hard_similarity/hard_sim_sample.txt", b" "),
                                            ("mcnc", "event_similarity/mcnc/cmcnc_sample.txt", b"|")])
def test_text_readers_refuse_a_line_past_the_cap(capped, tmp_path, reader, rel, sep):
    f = tmp_path / Path(rel).name
    shutil.copy(S / rel, f)
    with open(f, "ab") as out:
        piece = (b"word" + sep) * 65536
        for _ in range(BIG // len(piece)):
            out.write(piece)
        out.write(b"end\n")
    res, peak = _child(_ingest(reader, f))
    assert res.get("type") == "InputError" and "record longer than 1048576 bytes" in res["error"]
    assert peak - capped < BUDGET, (peak - capped) >> 20


@pytest.mark.parametrize("reader,rel,name,pre,post", [
    ("maven_sentences", "maven_sentences", "maven_sentences_sample.json", b'[{"id": "x", "tokens": [', b'], "events": []}]'),
    ("maven_fewshot", "maven_fewshot", "dev.json", b'{"Attack": [{"id": 1, "tokens": [', b'], "events": []}]}'),
    ("ontoevent", "ontoevent", "event_relation.json", b'{"COSUPER": [[', b"]]}"),
])
def test_document_readers_refuse_a_file_past_the_cap_before_reading_it(capped, tmp_path, reader, rel, name, pre, post):
    d = tmp_path / rel
    shutil.copytree(S / rel, d)
    with open(d / name, "wb") as f:
        _big_json_array(f, pre, post)
    t0 = time.perf_counter()
    res, peak = _child(_ingest(reader, d))
    assert res.get("type") == "InputError" and res["error"].startswith(f"{d / name}:-: record longer than {CAP} bytes")
    assert peak - capped < BUDGET and time.perf_counter() - t0 < 5


def test_xml_readers_refuse_a_file_past_the_cap(capped, tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(S / "framenet", d)
    with open(d / "frame" / "Attack.xml", "ab") as f:
        f.write(b"<!-- ")
        for _ in range(BIG >> 20):
            f.write(b"x" * (1 << 20))
        f.write(b" -->")
    res, peak = _child(_ingest("framenet", d))
    assert res.get("type") == "InputError" and res["error"].startswith(f"{d / 'frame' / 'Attack.xml'}:-: record longer")
    a = tmp_path / "ace"
    shutil.copytree(S / "ace2005", a)
    sgm = next(a.rglob("*.sgm"))
    with open(sgm, "ab") as f:
        for _ in range(BIG >> 20):
            f.write(b"x" * (1 << 20))
    res, peak2 = _child(_ingest("ace2005", a))
    assert res.get("type") == "InputError" and res["error"].startswith(f"{sgm}:-: record longer")
    assert max(peak, peak2) - capped < BUDGET


def test_zip_of_many_small_members_is_refused_by_the_total_cap(capped, tmp_path):
    """Members each under the ratio floor (1 MiB) used to add up unchecked: 1,536 of them were 1.5 GiB."""
    z = tmp_path / "fn.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((S / "framenet").rglob("*.xml")):
            zf.write(p, "framenet/" + str(p.relative_to(S / "framenet")))
        for i in range(48):
            zf.writestr(f"framenet/junk/j{i:04d}.bin", b"\0" * (1 << 20))
    from eventatlas.readers._zip import SafeZip

    with SafeZip(z) as s:
        assert s.max_total == int(z.stat().st_size * 200)
        with pytest.raises(Exception, match=r"fn\.zip:-: archive expands to over \d+ bytes in total"):
            for n in s.namelist():
                s.read(n)
        assert s.inflated <= s.max_total
    with SafeZip(z, max_total=1 << 40, max_ratio=1e6) as s:  # trusted: raised caps read it all
        assert sum(len(s.read(n)) for n in s.namelist()) > 48 << 20


def test_event_tuple_pairs_are_capped_per_document(eventatlas_env, tmp_path):
    f = tmp_path / "t.txt"
    events = [f"v{i} s{i} o{i} _NULL_" for i in range(1500)]  # one 30 KB document: 1.1 M pairs uncapped
    f.write_text(" <TUP> ".join(events) + "\nwon team game _NULL_ <TUP> scored striker goal _NULL_\n")
    t0 = time.perf_counter()
    res, _ = _child(_ingest("event_tuples", f))
    assert time.perf_counter() - t0 < 10
    assert res["rows"]["event_pairs"] == 100 * 99 // 2 + 1 and res["rows"]["mentions"] == 1502
    assert res["stats"]["pair_capped_documents"] == 1
    res, _ = _child(_ingest("event_tuples", f, max_pair_events=200))  # the option moves it
    assert res["rows"]["event_pairs"] == 200 * 199 // 2 + 1
