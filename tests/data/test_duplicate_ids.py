"""Repeated ids of any kind (documents, frames/types, LU documents) are rejected together with the rows
that belong to them, by the one guard every reader's output passes through (readers._common.unique_ids)."""
from __future__ import annotations

import shutil

import pyarrow.parquet as pq

from eventatlas import config
from eventatlas.data.ingest import ingest
from eventatlas.io import Rejects

SAMPLES = config.samples_dir()


def _table(ds: str, name: str) -> list[dict]:
    return pq.read_table(config.datasets_dir() / ds / f"{name}.parquet").to_pylist()


def test_ace_second_apf_under_one_docid_is_rejected_with_its_mentions(eventatlas_env, tmp_path):
    src = SAMPLES / "ace2005" / "data" / "English"
    nw, bn = "SAMPLE_NW_20260114.0001", "SAMPLE_BN_20260203.1800.0042"
    d = tmp_path / "ace"
    d.mkdir()
    for stem in (nw, bn):
        for ext in (".apf.xml", ".sgm"):
            shutil.copy(next(src.rglob(stem + ext)), d / (stem + ext))
    alone = ingest("ace2005", d, dataset="ace_ok", progress=False)
    per_doc = {}
    for m in _table("ace_ok", "mentions"):
        per_doc[m["doc_id"]] = per_doc.get(m["doc_id"], 0) + 1
    assert per_doc[nw] > 0 and per_doc[bn] > 0
    # the second file (sorted after the first) claims the first file's DOCID
    apf = d / f"{nw}.apf.xml"
    apf.write_text(apf.read_text().replace(f'DOCID="{nw}"', f'DOCID="{bn}"'))
    m = ingest("ace2005", d, dataset="ace_dup", progress=False)
    docs, mentions = _table("ace_dup", "documents"), _table("ace_dup", "mentions")
    assert [x["doc_id"] for x in docs] == [bn]
    # only the first file's mentions stay under that id, each one a substring of that document's text
    assert len(mentions) == per_doc[bn]
    text = docs[0]["text"]
    assert all(x["sentence"] in text for x in mentions)
    # one reject for the repeated document and one per mention it carried, all counted
    assert m["rejects"]["duplicate_document"] == 1 + per_doc[nw]
    rej = [r for r in _table("ace_dup", "rejects") if r["reason"] == "duplicate_document"]
    assert any(r["location"] == f"doc_id {bn!r}" and nw in r["source"] for r in rej)
    assert alone["rows"]["mentions"] == per_doc[nw] + per_doc[bn]


def test_framenet_two_files_one_frame_name_rejected(eventatlas_env, tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(SAMPLES / "framenet", d)
    shutil.copy(d / "frame" / "Attack.xml", d / "frame" / "Attack_copy.xml")
    m = ingest("framenet", d, dataset="fn_dup", progress=False)
    types = [t["type_id"] for t in _table("fn_dup", "event_types")]
    assert types.count("Attack") == 1
    assert len(types) == len(set(types))
    assert m["rejects"]["duplicate_type"] == 1
    (rej,) = [r for r in _table("fn_dup", "rejects") if r["reason"] == "duplicate_type"]
    assert rej["location"] == "type_id 'Attack'" and rej["source"].endswith("Attack_copy.xml")
    assert "already read from" in rej["detail"] and rej["detail"].endswith("this repeat is skipped")


def test_framenet_two_lu_files_one_id_rejected_with_their_mentions(eventatlas_env, tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(SAMPLES / "framenet", d)
    lu = d / "lu" / "lu9005.xml"
    # same LU ID, other sentence ids: the copy's mentions are new ids and would otherwise be kept
    (d / "lu" / "lu9006.xml").write_text(lu.read_text().replace('sentence ID="', 'sentence ID="7'))
    base = ingest("framenet", SAMPLES / "framenet", dataset="fn_ok", progress=False)
    m = ingest("framenet", d, dataset="fn_lu", progress=False)
    assert m["rows"]["mentions"] == base["rows"]["mentions"]
    assert m["rows"]["documents"] == base["rows"]["documents"]
    n_lu = sum(1 for x in _table("fn_ok", "mentions") if x["doc_id"].startswith("lu:"))
    assert n_lu > 0 and m["rejects"]["duplicate_document"] == 1 + n_lu


def test_guard_unit_rows_of_a_repeat_dropped_until_next_document():
    from eventatlas.readers._common import unique_ids

    rows = [("documents", {"doc_id": "a", "source": "f1"}), ("mentions", {"mention_id": "m1", "doc_id": "a"}),
            ("documents", {"doc_id": "a", "source": "f2"}), ("mentions", {"mention_id": "m2", "doc_id": "a"}),
            ("mention_relations", {"source_mention_id": "m2", "target_mention_id": "m1"}),
            ("documents", {"doc_id": "b", "source": "f3"}), ("mentions", {"mention_id": "m3", "doc_id": "b"}),
            ("mentions", {"mention_id": "m3", "doc_id": "b"}),
            ("event_types", {"type_id": "T"}), ("event_types", {"type_id": "T", "_source": "t2"})]
    rej = Rejects("t")
    kept = list(unique_ids(iter(rows), rej, "in"))
    assert [(t, r.get("mention_id") or r.get("doc_id") or r.get("type_id")) for t, r in kept] == [
        ("documents", "a"), ("mentions", "m1"), ("documents", "b"), ("mentions", "m3"), ("event_types", "T")]
    assert rej.counts() == {"duplicate_document": 3, "duplicate_mention": 1, "duplicate_type": 1}
    assert [r["source"] for r in rej.rows] == ["f2", "f2", "f2", "in", "t2"]
