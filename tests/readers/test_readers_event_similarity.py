from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import hard_similarity, mcnc, transitive_similarity


def collect(reader, path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in reader.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out["event_pairs"], r, st


def key(e):
    return (e["subj"], e["verb"], e["obj"])


@pytest.mark.shared_data
def test_real_hard_similarity_both_layouts_agree():
    quad, r, st = collect(hard_similarity, shared_path("event_similarity", "hard_quadruples.txt"))
    assert len(quad) == 230 and st["blocks"] == 115 and len(r) == 0
    assert sum(p["score"] for p in quad) == 115
    num, r2, _ = collect(hard_similarity, shared_path("event_similarity", "hard_sim_dataset_test_final.txt"))
    # the numbered file labels two blocks 1/1 (no similar pair): rejected, not guessed
    assert len(num) == 226 and r2.counts() == {"incomplete_block": 2}
    qset = {(key(p["event_a"]), key(p["event_b"]), p["score"]) for p in quad}
    assert {(key(p["event_a"]), key(p["event_b"]), p["score"]) for p in num} <= qset
    blocks = defaultdict(list)
    for p in num:
        blocks[p["block_id"]].append(p["score"])
    assert all(sorted(v) == [0.0, 1.0] for v in blocks.values())


@pytest.mark.shared_data
def test_real_mcnc_blocks():
    rows, r, st = collect(mcnc, shared_path("event_similarity", "cmcnc_dev.txt"))
    assert st["blocks"] == 71 and len(r) == 0
    blocks = defaultdict(list)
    for p in rows:
        blocks[p["block_id"]].append(p)
    assert len(blocks) == 71 and all(sum(p["score"] for p in b) == 1.0 for b in blocks.values())
    first = blocks["cmcnc_dev:1"]
    assert key(first[0]["event_b"]) == ("performance", "part of", "festival") and first[0]["score"] == 1.0
    assert key(first[0]["event_a"]) == ("program", "built on", "pieces")
    assert len(json.loads(first[0]["extra"])["context"]) == 5 and len(first) == 6  # 1 held-out + 5 negatives
    assert len(rows) == 71 * 6 and all(json.loads(p["extra"])["n_candidates"] == 6 for p in rows)


def test_samples_all_three_tasks():
    d = samples_dir() / "event_similarity"
    q, r, _ = collect(hard_similarity, d / "hard_similarity" / "hard_quadruples_sample.txt")
    n, r2, _ = collect(hard_similarity, d / "hard_similarity" / "hard_sim_sample.txt")
    assert len(q) == len(n) == 6 and not len(r) and not len(r2)
    assert {(key(p["event_a"]), key(p["event_b"]), p["score"]) for p in q} == {(key(p["event_a"]), key(p["event_b"]), p["score"]) for p in n}
    t, r3, _ = collect(transitive_similarity, d / "transitive_similarity")
    assert [p["score"] for p in t] == [6.125, 1.5, 5.875, 3.25] and not len(r3)
    assert key(t[1]["event_b"]) == ("worker", "fire", "employee") and {p["task"] for p in t} == {"transitive_similarity"}
    m, r4, st = collect(mcnc, d / "mcnc")
    assert st["blocks"] == 2 and len(m) == 4 + 3 and not len(r4)


def test_bad_lines_are_rejected_with_line_numbers(tmp_path):
    p = tmp_path / "hard.txt"
    p.write_text("a | b | c | d | e | f | g | h | i | j | k | l\na | b | c\n1 x y z x y w 3\n", encoding="utf-8")
    rows, r, _ = collect(hard_similarity, p)
    assert len(rows) == 2 and [(x["location"], x["reason"]) for x in r.rows] == [("line 2", "bad_record"), ("line 3", "bad_record")]
    t = tmp_path / "trans.txt"
    t.write_text("a | b | c | d | e | f | high\na | b | c | d | e | f | 2.5\n", encoding="utf-8")
    rows, r, _ = collect(transitive_similarity, t)
    assert len(rows) == 1 and r.counts() == {"bad_score": 1}
    m = tmp_path / "mcnc.txt"
    m.write_text("a|b|c\nHOLDOUT_SEP\nd|e|f\nNEG_SEP\nDOC_SEP\nx|y|z\nHOLDOUT_SEP\nq|r|s\nNEG_SEP\nt|u|v\n", encoding="utf-8")
    rows, r, _ = collect(mcnc, m)
    assert len(rows) == 2 and r.counts() == {"incomplete_block": 1}
    bad = tmp_path / "enc.txt"
    bad.write_bytes(b"a | b | c | d | e | f | 1.0\ncaf\xe9 | b | c | d | e | f | 1.0\n")
    with pytest.raises(InputError, match="enc.txt:line 2"):
        collect(transitive_similarity, bad)
