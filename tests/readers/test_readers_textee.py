"""The ``textee`` readers on self-written data in TextEE's processed layout (splitN/{train,dev,test}.json,
one window a line), through the ingest entry the CLI uses; and the malformed-input table."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.readers import assert_offsets, collect

from eventatlas import config
from eventatlas.data.manifest import Manifest
from eventatlas.data.protocol import protocol_for
from eventatlas.data.ingest import ingest
from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import get_reader, textee

SAMPLES = config.samples_dir() / "textee"
ACE = SAMPLES / "ace05-en" / "split1"
D1, D2, D3 = "SAMPLE_NW_20030401.0001", "SAMPLE_BN_20030402.0002", "SAMPLE_WL_20030403.0003"


def _rows(ds: str, table: str) -> list[dict]:
    return pq.read_table(config.datasets_dir() / ds / f"{table}.parquet").to_pylist()


def _lines(split: str = "train", src: Path = ACE) -> list[dict]:
    return [json.loads(x) for x in (src / f"{split}.json").read_text().splitlines() if x.strip()]


def _copy(tmp_path: Path, name: str = "ace05-en") -> Path:
    d = tmp_path / name / "split1"
    shutil.copytree(ACE, d)
    return d


def _write(d: Path, split: str, recs: list) -> None:
    (d / f"{split}.json").write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs))


def test_ace_sample_end_to_end(eventatlas_env):
    m = ingest("textee_ace05", ACE, progress=False)
    assert m["dataset"] == "textee_ace05" and m["reader"] == "textee_ace05" and m["rejects"] == {}
    assert m["rows"]["documents"] == 3 and m["rows"]["mentions"] == 5
    tx = m["stats"]["textee"]
    assert tx["dataset"] == "ace05-en" and tx["split_dir"] == "split1" and tx["windows"] == 4 and tx["documents"] == 3
    assert tx["event_types"] == ["Conflict.Attack", "Life.Die"] and tx["protocol"] == "registered: textee_ace05"
    docs = {d["doc_id"]: d for d in _rows("textee_ace05", "documents")}
    assert {k: d["split"] for k, d in docs.items()} == {D1: "train", D2: "dev", D3: "test"}
    # the two windows of D1 are one document: its sentences in window order, no invented full text
    assert docs[D1]["sentences"] == ["Rebels attacked a supply convoy near Basra on Tuesday.", "Two soldiers\ndied in the ambush, officials said."]
    assert docs[D1]["text"] is None
    extra = json.loads(docs[D1]["extra"])
    assert extra["wnd_ids"] == [f"{D1}-0", f"{D1}-1"]
    assert {(e["sent_idx"], e["text"], e["type"]) for e in extra["entity_mentions"]} >= {(0, "Basra", "GPE"), (1, "soldiers", "PER")}
    basra = next(e for e in extra["entity_mentions"] if e["text"] == "Basra")
    assert docs[D1]["sentences"][0][basra["start"]:basra["end"]] == "Basra"
    assert extra["relation_mentions"] == [{"id": f"{D1}-R1-1", "type": "PHYS", "sent_idx": 0,
                                           "args": [["Arg-1", f"{D1}-E2-3"], ["Arg-2", f"{D1}-E3-4"]]}]
    ms = _rows("textee_ace05", "mentions")
    assert_offsets(ms)
    by = {(m["doc_id"], m["trigger"]): m for m in ms}
    died = by[(D1, "died")]
    assert died["sent_idx"] == 1 and died["sentence"] == docs[D1]["sentences"][1] and died["labels"] == ["Life.Die"]
    assert died["split"] == "train" and died["trigger_start"] == 13  # after "Two soldiers\n"
    # the argument is kept with its role, entity and offsets into the window text
    assert died["arguments"] == [{"role": "Victim", "text": "soldiers", "start": 4, "end": 12, "entity_id": f"{D1}-E1-2"}]
    dx = json.loads(died["extra"])
    assert dx["wnd_id"] == f"{D1}-1" and dx["token_span"] == [2, 3] and dx["arg_entity_types"] == {f"{D1}-E1-2": "PER"}
    assert [(a["role"], a["text"]) for a in by[(D2, "exploded")]["arguments"]] == [("Place", "Baghdad")]
    assert sorted(m["split"] for m in ms) == ["dev", "dev", "test", "train", "train"]
    types = {t["type_id"]: t for t in _rows("textee_ace05", "event_types")}
    assert set(types) == {"Conflict", "Conflict.Attack", "Life", "Life.Die"}
    assert types["Life.Die"]["parent_id"] == "Life" and types["Life"]["parent_id"] is None and types["Life.Die"]["ontology"] == "ACE"
    assert json.loads(types["Conflict.Attack"]["extra"]) == {"textee_type": "Conflict:Attack"}
    assert types["Conflict.Attack"]["definition"].startswith("A violent physical act")  # the ace2005 reader's inventory
    # the registry's protocol reaches the methods through the manifest's reader
    man = Manifest.read(config.datasets_dir() / "textee_ace05")
    assert protocol_for(man, "batch_attention") == {"k_seen": 10, "mapping": "ace_framenet.tsv"}
    assert protocol_for(man, "emr", task="retrieval")["n_query"] == 10


@pytest.mark.parametrize("name,n_docs,n_mentions,types", [
    ("maven", 3, 7, ["Arriving", "Attack", "Destroying"]),
    ("wikievents", 3, 5, ["Conflict.Attack.DetonateExplode", "Life.Die.Unspecified"]),
])
def test_maven_and_wikievents_samples(name, n_docs, n_mentions, types):
    out, r, st = collect(get_reader(f"textee_{name}"), SAMPLES / name / "split1")
    assert len(r) == 0 and len(out["documents"]) == n_docs and len(out["mentions"]) == n_mentions
    assert st["textee"]["event_types"] == types and st["textee"]["dataset"] == name
    assert_offsets(out["mentions"])
    first = out["documents"][0]
    assert len(first["sentences"]) == 2 and first["split"] == "train"


def test_argument_text_differing_only_in_whitespace_is_located():
    """TextEE's WikiEvents window text is the tokens joined by spaces ("Deir al - Zour") while the
    argument keeps the source's "Deir al-Zour": located on the window text, as on the real dev set."""
    out, r, st = collect(get_reader("textee_wikievents"), SAMPLES / "wikievents" / "split1")
    killed = next(m for m in out["mentions"] if m["trigger"] == "killed")
    assert killed["arguments"] == [{"role": "Place", "text": "Deir al - Zour", "start": 40, "end": 54,
                                    "entity_id": "sample_market_bombing-T12"}]
    assert "arguments_unlocated" not in st and "entities_unlocated" not in st


def test_generic_reader_on_the_genia_sample():
    out, r, st = collect(textee, SAMPLES / "genia2011" / "split1")
    tx = st["textee"]
    assert len(r) == 0 and tx["dataset"] == "genia2011" and tx["event_types"] == ["Gene_expression", "Phosphorylation"]
    assert tx["protocol"].startswith("none registered for genia2011: biomedical event types")
    # GENIA names windows after the release's files: no index after the doc id, so file order is kept
    assert tx["window_order"] == {"file order": 1, "wnd_id index": 2}
    doc = out["documents"][0]
    assert doc["doc_id"] == "PMC-1310901" and json.loads(doc["extra"])["wnd_ids"] == ["PMC-1310901-00-TIAB_0", "PMC-1310901-01-Introduction_0"]
    assert [m["sent_idx"] for m in out["mentions"] if m["doc_id"] == "PMC-1310901"] == [0, 1]
    assert out["mentions"][2]["sentence"] == "Expression of c-fos (a proto-oncogene) was detected."  # the source text, not re-joined
    assert_offsets(out["mentions"])


def test_windows_join_in_wnd_id_order_whatever_the_file_order(tmp_path):
    d = _copy(tmp_path)
    base, _, _ = collect(textee, d)
    recs = _lines()
    _write(d, "train", recs[::-1])  # D1-1 before D1-0
    out, r, st = collect(textee, d)
    assert len(r) == 0 and st["windows_reordered"] == 1 and st["textee"]["window_order"] == {"wnd_id index": 3}
    assert out["documents"][0]["sentences"] == base["documents"][0]["sentences"]
    assert [(m["mention_id"], m["sent_idx"]) for m in out["mentions"]] != [] and \
        sorted((m["mention_id"], m["sent_idx"]) for m in out["mentions"]) == sorted((m["mention_id"], m["sent_idx"]) for m in base["mentions"])
    # window ids without an index (GENIA names windows after its files): file order is kept and recorded
    for i, rec in enumerate(recs):
        rec["wnd_id"] = ["PMC-1-02-Results", "PMC-1-01-Introduction"][i]
    _write(d, "train", recs)
    out, r, st = collect(textee, d)
    assert st["textee"]["window_order"] == {"file order": 1, "wnd_id index": 2}
    assert json.loads(out["documents"][0]["extra"])["wnd_ids"] == ["PMC-1-02-Results", "PMC-1-01-Introduction"]


def test_generic_reader_names_the_dataset_and_says_why_no_protocol(eventatlas_env, tmp_path):
    d = _copy(tmp_path, "casie")
    m = ingest("textee", d, dataset="textee_casie", progress=False)
    tx = m["stats"]["textee"]
    assert tx["dataset"] == "casie" and m["rejects"] == {}
    assert tx["protocol"] == ("none registered for casie: 5 cybersecurity event types: too few for a seen/unseen split; "
                              "give a method's parameters explicitly")
    assert {t["ontology"] for t in _rows("textee_casie", "event_types")} == {"other"}
    assert protocol_for(Manifest.read(config.datasets_dir() / "textee_casie"), "batch_attention") == {}


def test_textee_readers_refuse_another_datasets_output(tmp_path):
    with pytest.raises(InputError, match=r"split1:-: this is TextEE's ace05-en output, not maven: ingest it with `textee_ace05`$"):
        collect(get_reader("textee_maven"), ACE)
    with pytest.raises(InputError, match=r"this is TextEE's casie output, not ace05-en: ingest it with `textee`$"):
        collect(get_reader("textee_ace05"), _copy(tmp_path, "casie"))
    # a copy under a directory of the user's own naming is taken for what the reader name says
    _, r, st = collect(get_reader("textee_ace05"), _copy(tmp_path, "my_ace_copy"))
    assert st["textee"]["dataset"] == "ace05-en" and len(r) == 0
    # the generic reader on a set with a registered protocol points to the reader that carries it
    _, _, st = collect(textee, ACE)
    assert st["textee"]["protocol"] == "registered for reader textee_ace05: ingest with it to use it"


def test_a_dataset_directory_asks_for_one_split(tmp_path):
    for n in (1, 2):
        shutil.copytree(ACE, tmp_path / "ace05-en" / f"split{n}")
    with pytest.raises(InputError, match=r"ace05-en:-: holds TextEE splits split1, split2: pass one of them \(e\.g\. .*split1\); "
                                         r"each is a re-partition of the same documents$"):
        collect(textee, tmp_path / "ace05-en")
    # one split file alone is fine: its name gives the split
    out, r, st = collect(textee, tmp_path / "ace05-en" / "split2" / "dev.json")
    assert {d["split"] for d in out["documents"]} == {"dev"} and st["textee"]["dataset"] == "ace05-en"


def test_reads_as_a_stream(tmp_path):
    """The first document comes out before a later line is even parsed (no whole-file load)."""
    d = _copy(tmp_path)
    recs = _lines()
    extra = {**recs[0], "doc_id": "OTHER", "wnd_id": "OTHER-0"}
    _write(d, "train", recs + [extra, '{"doc_id": '])
    got = []
    with pytest.raises(InputError, match=r"train\.json:line 4: invalid JSON"):
        for t, row in textee.read(d, rejects=Rejects("t")):
            got.append((t, row.get("doc_id")))
    assert got[0] == ("documents", D1) and ("mentions", D1) in got


# The malformed-input table: each case mutates the ACE sample and states the outcome, refused (one InputError
# line naming file and line, the previous version untouched) or counted rejects (reason, location).
def _bad_json(d):
    recs = (d / "train.json").read_text().splitlines()
    _write(d, "train", [recs[0], '{"doc_id": "X", "tokens": ['])


def _mutate(split, i, fn):
    def go(d):
        recs = _lines(split)
        fn(recs[i])
        _write(d, split, recs)
    return go


def _dup_window(d):
    _write(d, "dev", _lines("dev") + [_lines("train")[0]])


def _doc_in_two_splits(d):
    _write(d, "dev", _lines("dev") + [{**_lines("train")[1], "wnd_id": f"{D1}-7"}])


def _scattered(d):
    a, b = _lines("train")
    _write(d, "train", [a, {**_lines("dev")[0], "doc_id": "MIDDLE", "wnd_id": "MIDDLE-0"}, b])


def _empty(d):
    for s in ("train", "dev", "test"):
        (d / f"{s}.json").write_bytes(b"")


def _wrong_format(d):
    for s in ("dev", "test"):
        (d / f"{s}.json").unlink()
    shutil.copy(config.samples_dir() / "maven" / "train.jsonl", d / "train.json")  # MAVEN's own release format


def _latin1(d):
    (d / "train.json").write_bytes((d / "train.json").read_bytes().replace(b"Basra", b"B\xe4sra"))


MALFORMED = [
    # case, mutation, path inside the split dir, expected: ("refused", message) | ("reject", {reason: n}, location)
    ("bad JSON line", _bad_json, "", ("refused", r"train\.json:line 2: invalid JSON: Expecting value \(column 28\)")),
    ("not UTF-8", _latin1, "", ("refused", r"train\.json:line 1: not valid UTF-8 \(invalid continuation byte at byte \d+\); re-encode")),
    ("missing tokens", _mutate("train", 0, lambda r: r.pop("tokens")), "",
     ("reject", {"missing_field": 1}, "train.json line 1", "window lacks tokens")),
    ("tokens not a list", _mutate("train", 0, lambda r: r.__setitem__("tokens", "Rebels attacked")), "",
     ("reject", {"bad_field": 1}, "train.json line 1", "tokens must be a non-empty list of strings")),
    ("trigger span out of range", _mutate("train", 1, lambda r: r["event_mentions"][0]["trigger"].__setitem__("end", 99)), "",
     ("reject", {"bad_offsets": 1}, "train.json line 2 event_mentions[0]", "trigger token span [2, 99) outside the window's 10 tokens")),
    ("trigger span shifted", _mutate("train", 0, lambda r: r["event_mentions"][0]["trigger"].__setitem__("start", 0)), "",
     ("reject", {"offset_mismatch": 1}, "train.json line 1 event_mentions[0]", "sentence[0:15] = 'Rebels attacked' but trigger is 'attacked'")),
    ("event without type", _mutate("dev", 0, lambda r: r["event_mentions"][1].pop("event_type")), "",
     ("reject", {"missing_field": 1}, "dev.json line 1 event_mentions[1]", "event lacks event_type")),
    ("offset of the wrong type", _mutate("test", 0, lambda r: r.__setitem__("event_mentions", 5)), "",
     ("reject", {"bad_record": 1}, "test.json line 1", "TypeError: 'int' object is not iterable")),
    ("duplicate window id", _dup_window, "",
     ("reject", {"duplicate_window": 1}, "dev.json line 2", f"window id '{D1}-0' already read at train.json line 1; this repeat is skipped")),
    ("document in two splits", _doc_in_two_splits, "",
     ("reject", {"duplicate_document": 1}, "dev.json line 2", f"document id '{D1}' already read at train.json line 1; this repeat is skipped")),
    ("document's windows not together", _scattered, "",
     ("reject", {"duplicate_document": 1}, "train.json line 3", f"document id '{D1}' already read at train.json line 1")),
    ("unknown split file", lambda d: (d / "dev.json").rename(d / "valid.json"), "valid.json",
     ("refused", r"valid\.json:-: not a TextEE split file: the split is named by the file \(train\.json, dev\.json, test\.json\)$")),
    ("no split files", lambda d: [p.unlink() for p in d.iterdir()], "",
     ("refused", r"split1:-: none of TextEE's split files train\.json, dev\.json, test\.json in this directory$")),
    ("empty files", _empty, "",
     ("refused", r"split1:-: this does not look like textee_ace05 input: no mentions found \(empty or another format\); nothing was written")),
    ("wrong-format file", _wrong_format, "",
     ("refused", r"train\.json:line 1: this does not look like textee_ace05 input: missing_field \(window lacks doc_id, wnd_id, tokens, "
                 r"event_mentions\); \d+ records rejected, 0 mentions kept; nothing was written")),
]


@pytest.mark.parametrize("case,mutate,sub,expect", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_input(eventatlas_env, tmp_path, case, mutate, sub, expect):
    good = ingest("textee_ace05", ACE, dataset="tx", progress=False)
    out = config.datasets_dir() / "tx"
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    d = _copy(tmp_path)
    mutate(d)
    src = d / sub if sub else d
    if expect[0] == "refused":
        with pytest.raises(InputError) as e:
            ingest("textee_ace05", src, dataset="tx", progress=False)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(e.value.source) and re.search(expect[1], msg), msg
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing replaced
        return
    _, counts, where, detail = expect
    m = ingest("textee_ace05", src, dataset="tx", progress=False, allow_shrink=True)
    assert m["rejects"] == counts
    (r,) = _rows("tx", "rejects")
    assert f"{Path(r['source']).name} {r['location']}".startswith(where) and r["detail"].startswith(detail), r
    assert m["rows"]["mentions"] >= good["rows"]["mentions"] - 2  # only the bad record is gone


def test_type_names_stay_distinct_where_the_leaf_is_generic():
    from eventatlas.readers.textee import type_names

    got = type_names(["Life", "Life.Die.Unspecified", "Life.Injure.Unspecified", "Conflict.Attack.DetonateExplode",
                      "conflict.attack.n/a", "conflict.attack.stabbing", "Justice.Attack", "Movement.Attack"])
    assert got == {"Life": "Life", "Life.Die.Unspecified": "Life Die", "Life.Injure.Unspecified": "Life Injure",
                   "Conflict.Attack.DetonateExplode": "DetonateExplode", "conflict.attack.n/a": "conflict attack",
                   "conflict.attack.stabbing": "stabbing", "Justice.Attack": "Justice Attack",
                   "Movement.Attack": "Movement Attack"}
    assert len(set(got.values())) == len(got)  # before: 'Unspecified' twice, 'Attack' twice
    out, _, _ = collect(get_reader("textee_wikievents"), SAMPLES / "wikievents" / "split1")
    names = {t["type_id"]: t["name"] for t in out["event_types"]}
    assert names["Life.Die.Unspecified"] == "Life Die" and names["Conflict.Attack.DetonateExplode"] == "DetonateExplode"
