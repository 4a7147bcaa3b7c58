from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import event_tuples


def collect(path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in event_tuples.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out, r, st


def svo(e):
    return (e["subj"], e["verb"], e["obj"])


def test_hand_file(tmp_path):
    f = tmp_path / "docs.txt"
    f.write_text("arrested police suspect _NULL_ <TUP> charged _NULL_ suspect with <DIST> won team title in "
                 "<TUP> arrested police suspect at\n"
                 "\n"
                 "charged _NULL_ suspect _NULL_ <TUP> arrested police suspect _NULL_ <TUP> fled he _NULL_ to\n")
    out, r, st = collect(f)
    assert len(r) == 0 and st == {"distractors": 1, "documents": 2, "cooccurring_pairs": 3}
    docs = out["documents"]
    assert [d["doc_id"] for d in docs] == ["docs:1", "docs:3"]
    assert json.loads(docs[0]["extra"]) == {"n_events": 3, "n_distractors": 1}
    m = out["mentions"]
    assert [x["sentence"] for x in m[:3]] == ["police arrested suspect", "charged suspect", "police arrested suspect"]
    for x in m:  # the verb is the trigger, at its offsets
        assert x["sentence"][x["trigger_start"]:x["trigger_end"]] == x["trigger"] == json.loads(x["extra"])["svo"]["verb"]
    assert [x["sent_idx"] for x in m[:3]] == [0, 1, 3]  # the distractor (position 2) is left out
    assert json.loads(m[1]["extra"]) == {"svo": {"subj": None, "verb": "charged", "obj": "suspect"}, "prep": "with",
                                         "position": 1}
    assert {a["role"]: a["text"] for a in m[0]["arguments"]} == {"subj": "police", "obj": "suspect"}
    # co-occurrence over distinct (s, v, o) per document: (arrest, charge) in both documents = 2; the
    # repeated "police arrested suspect" of document 1 counts once; "fled" only with the others of doc 2
    pairs = {frozenset([svo(p["event_a"]), svo(p["event_b"])]): p["score"] for p in out["event_pairs"]}
    arrest, charge, fled = ("police", "arrested", "suspect"), (None, "charged", "suspect"), ("he", "fled", None)
    assert pairs == {frozenset([arrest, charge]): 2.0, frozenset([arrest, fled]): 1.0, frozenset([charge, fled]): 1.0}
    assert {p["task"] for p in out["event_pairs"]} == {"cooccurrence"}


def test_bad_tuples_are_rejected_with_their_place(tmp_path):
    f = tmp_path / "docs.txt"
    f.write_text("arrested police suspect <TUP> _NULL_ police suspect _NULL_ <TUP> fled he _NULL_ to\n"
                 "x y <TUP> z\n")
    out, r, _ = collect(f)
    assert r.counts() == {"bad_tuple": 3, "no_verb": 1, "no_events": 1}
    assert len(out["mentions"]) == 1 and len(out["documents"]) == 1 and not out["event_pairs"]
    assert [(x["location"], x["reason"]) for x in r.rows[:2]] == [("line 1, tuple 0", "bad_tuple"),
                                                                  ("line 1, tuple 1", "no_verb")]


def test_not_a_tuple_file_is_one_clear_error(tmp_path):
    f = tmp_path / "plain.txt"
    f.write_text("this is plain text with four\n")
    with pytest.raises(InputError, match=r"plain.txt.*line 1.*no ' <TUP> ' separator"):
        collect(f)


def test_shipped_sample():
    out, r, st = collect(samples_dir() / "event_tuples" / "tuples_sample.txt")
    assert len(r) == 0 and st["documents"] == 8 and st["distractors"] == 2
    assert len(out["mentions"]) == 33  # 5 + 4 + 4 + 4 + 4 + 4 + 4 + 4 (two <DIST> tuples left out)
    # pairs such as ("striker scored goal", "fans celebrated victory") occur in two documents, none in more
    top = max(out["event_pairs"], key=lambda p: p["score"])
    assert top["score"] == 2.0


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_nyt_tuples():
    out, r, st = collect(shared_path("event_tuples", "nyt_inverse_cloze_docs.txt"))
    # 2,161 documents of 26 tuples plus 5 distractors each (counted by hand over the file)
    assert len(r) == 0 and st["documents"] == 2161 and st["distractors"] == 10805
    assert len(out["mentions"]) == 2161 * 26
    assert len({svo(json.loads(m["extra"])["svo"]) for m in out["mentions"]}) > 10_000
    assert st["cooccurring_pairs"] == len(out["event_pairs"]) > 500_000


def test_ingested_sample_is_cooccurrence_training_data(tmp_path):
    from eventatlas.data import Manifest
    from eventatlas.data.ingest import ingest

    ingest("event_tuples", samples_dir() / "event_tuples" / "tuples_sample.txt", out_dir=tmp_path / "et")
    man = Manifest.read(tmp_path / "et")
    # co-occurrence counts are training data: not an event-pair similarity benchmark
    assert man.kinds() == {"mentions", "event_cooccurrence"}
    assert man.rows["event_pairs"] == man.stats["cooccurring_pairs"] > 0
