"""One wrong-type field is a counted reject naming file and line/record, and the ingest goes on: it used
to refuse the whole file ("after N rows: unexpected input structure") in several readers. JSON nested
too deeply for the parser is a clean one-line refusal (exit 2), not an internal failure."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eventatlas import config
from eventatlas.data.ingest import ingest

S = config.samples_dir()
ROOT = Path(__file__).resolve().parents[2]


def _copy(tmp_path: Path, rel: str) -> Path:
    d = tmp_path / rel.replace("/", "_")
    shutil.copytree(S / rel, d)
    return d


def _base(reader: str, rel: str) -> dict:
    return ingest(reader, S / rel, dataset=f"base_{reader}", progress=False)


def _reject(ds: str, reason: str) -> list[dict]:
    import pyarrow.parquet as pq

    return [r for r in pq.read_table(config.datasets_dir() / ds / "rejects.parquet").to_pylist() if r["reason"] == reason]


def test_maven_sentences_event_type_int(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "maven_sentences")
    f = d / "maven_sentences_sample.json"
    data = json.loads(f.read_text())
    i = next(i for i, s in enumerate(data) if s["events"])
    data[i]["events"][0]["event_type"] = 7
    f.write_text(json.dumps(data))
    base = _base("maven_sentences", "maven_sentences")
    m = ingest("maven_sentences", d, dataset="ms", progress=False)
    assert m["rejects"].get("bad_field") == 1  # one field's value, as textee names it
    assert m["rows"]["mentions"] == base["rows"]["mentions"] - 1
    (r,) = _reject("ms", "bad_field")
    assert r["source"].endswith("maven_sentences_sample.json") and r["location"] == f"[{i}].events[0]"


def test_maven_fewshot_list_replaced_by_int_and_event_type_int(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "maven_fewshot")
    f = d / "dev.json"
    data = json.loads(f.read_text())
    keys = list(data)
    n_first = len(data[keys[0]])
    data[keys[0]] = 7  # a whole type's list of instances is a number
    data[keys[1]][0]["events"][0]["event_type"] = {"x": 1}
    f.write_text(json.dumps(data))
    m = ingest("maven_fewshot", d, dataset="mf", progress=False)
    assert m["rejects"].get("bad_record") == 1 and m["rejects"].get("bad_field") == 1 and n_first > 0
    assert [r["location"] for r in _reject("mf", "bad_record")] == [keys[0]]  # the list that is a number
    assert [r["location"] for r in _reject("mf", "bad_field")] == [f"{keys[1]}[0].events[0]"]  # the type
    assert m["rows"]["mentions"] > 0


def test_ontoevent_event_type_int_and_relation_not_a_list(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "ontoevent")
    f = d / "event_relation.json"
    data = json.loads(f.read_text())
    data["CAUSE"][0][1]["event_type"] = 7
    data["COSUPER"] = 7
    f.write_text(json.dumps(data))
    m = ingest("ontoevent", d, dataset="oe", progress=False)
    locs = {r["location"] for r in _reject("oe", "bad_record")}
    assert locs == {"CAUSE[0][1]", "COSUPER"}
    assert m["rows"]["mentions"] > 0 and m["rejects"]["relation_dropped"] >= 1


def test_wikievents_meta_not_a_list_and_event_type_int(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "wikievents")
    (d / "meta.json").write_text("7")
    lines = (d / "dev.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    doc["event_mentions"][0]["event_type"] = 7
    lines[0] = json.dumps(doc)
    (d / "dev.jsonl").write_text("\n".join(lines) + "\n")
    base = _base("wikievents", "wikievents")
    m = ingest("wikievents", d, dataset="we", progress=False)
    assert m["rejects"].get("bad_type_entry") == 1 and m["rejects"].get("bad_record") == 1
    (r,) = _reject("we", "bad_record")
    assert r["location"] == "line 1 event_mentions[0]" and r["source"].endswith("dev.jsonl")
    assert m["rows"]["mentions"] == base["rows"]["mentions"] - 1


def test_maven_event_type_int(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "maven")
    lines = (d / "train.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    doc["events"][0]["type"] = 7
    lines[0] = json.dumps(doc)
    (d / "train.jsonl").write_text("\n".join(lines) + "\n")
    m = ingest("maven", d, dataset="mv", progress=False)
    (r,) = _reject("mv", "bad_record")
    assert r["location"] == "line 1 events[0]" and m["rows"]["mentions"] > 0


def test_5000_digit_integers_are_record_rejects(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "maven")
    lines = (d / "train.jsonl").read_text().splitlines()
    doc = json.loads(lines[1])
    doc["events"][0]["mention"][0]["offset"] = [0, "HUGE"]
    lines[1] = json.dumps(doc).replace('"HUGE"', "9" * 5000)
    (d / "train.jsonl").write_text("\n".join(lines) + "\n")
    m = ingest("maven", d, dataset="mv", progress=False)
    (r,) = _reject("mv", "bad_offsets")
    assert r["location"] == "line 2 events[0].mention[0]" and "5000 digits" in r["detail"]
    assert m["rows"]["mentions"] > 0
    # ACE: a 5000-digit START attribute
    a = _copy(tmp_path, "ace2005")
    apf = next(a.rglob("*.apf.xml"))
    t = apf.read_text()
    j = t.index('START="', t.index("<anchor>")) + 7
    apf.write_text(t[:j] + "9" * 5000 + t[t.index('"', j):])
    m = ingest("ace2005", a, dataset="ace", progress=False)
    assert m["rejects"].get("bad_record") == 1 and m["rows"]["mentions"] > 0


def test_200k_deep_json_is_a_one_line_refusal_exit_2(tmp_path):
    d = _copy(tmp_path, "maven")
    lines = (d / "train.jsonl").read_text().splitlines()
    lines[1] = '{"id": ' + "[" * 200_000 + "]" * 200_000 + "}"
    (d / "train.jsonl").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "EVENTATLAS_PREFECT": "never", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "ingest", "maven", "--path", str(d)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {d / 'train.jsonl'}:line 2: JSON nested too deeply to parse "
                                             "(thousands of levels); not a record any reader reads"]


@pytest.mark.parametrize("reader,rel", [("maven_fewshot", "maven_fewshot"), ("ontoevent", "ontoevent")])
def test_deep_json_document_refused_cleanly(eventatlas_env, tmp_path, reader, rel):
    from eventatlas.errors import InputError

    d = _copy(tmp_path, rel)
    f = next(p for p in d.glob("*.json") if p.name != "maven_definition.json")
    f.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(InputError, match=r":-: JSON nested too deeply to parse"):
        ingest(reader, d, dataset="deep", progress=False)


def test_wikievents_coreference_of_a_missing_document_is_counted(eventatlas_env, tmp_path):
    """A doc_id that no longer matches its coreference file's doc_key lost the clusters without a trace."""
    d = _copy(tmp_path, "wikievents")
    lines = (d / "dev.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    old = doc["doc_id"]
    doc["doc_id"] = "renamed"
    lines[0] = json.dumps(doc)
    (d / "dev.jsonl").write_text("\n".join(lines) + "\n")
    m = ingest("wikievents", d, dataset="we", progress=False)
    (r,) = _reject("we", "orphan_coref")
    assert m["rejects"]["orphan_coref"] == 1 and r["location"] == f"doc_key {old!r}" and r["source"].endswith("dev.jsonlines")


def test_a_5000_digit_integer_in_kept_raw_data_does_not_refuse_the_file(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "wikievents")
    meta = json.loads((d / "meta.json").read_text())
    meta[0][1][0] = "HUGE"
    (d / "meta.json").write_text(json.dumps(meta).replace('"HUGE"', "9" * 5000))
    m = ingest("wikievents", d, dataset="we", progress=False)
    assert m["rows"]["mentions"] > 0 and m["rows"]["event_types"] > 0
