"""Evaluators (eventatlas.evaluation) on hand-computed cases: the arithmetic is in the comments."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.evaluation import METRIC_KEYS
from eventatlas.evaluation.pairs import evaluate_event_pairs, event_text, hard_metric_name
from eventatlas.ingest import ingest
from eventatlas.schema import EVENT_PAIRS

S2 = 1 / math.sqrt(2)


def by_metric(rows):
    assert all(tuple(r) == METRIC_KEYS for r in rows)
    return {r["metric"]: r["value"] for r in rows}


# ------------------------------------------------------------------ event pairs
def test_event_text():
    ev = {"subj": "Police", "verb": "arrest", "obj": "thief"}
    assert event_text(ev) == "Police arrest thief"
    assert event_text(ev, lower=True) == "police arrest thief"
    assert event_text(ev, "{verb} ({subj}, {obj})") == "arrest (Police, thief)"
    # null / _NULL_ / empty fields drop out without leaving double spaces
    assert event_text({"subj": None, "verb": "arrest", "obj": "_NULL_"}) == "arrest"
    assert event_text({"subj": "he", "verb": " ran ", "obj": ""}) == "he ran"
    assert event_text({"verb": "left"}) == "left"
    with pytest.raises(ValueError, match="every field null"):
        event_text({"subj": None, "verb": "_NULL_", "obj": None})
    with pytest.raises(ValueError, match="cannot be filled"):
        event_text(ev, "{agent} {verb}")
    with pytest.raises(ValueError, match="must be a mapping"):
        event_text(None)


def test_hard_metric_name():
    assert hard_metric_name("hard_similarity") == "hard_sim_acc"
    assert hard_metric_name("hard_similarity_ext") == "hard_sim_ext_acc"
    assert hard_metric_name("hard-extended_sample") == "hard_sim_ext_acc"
    assert hard_metric_name("text_sim") == "hard_sim_acc"  # "ext" only as a whole token


# 2-D vectors: a=(1,0) b=(1,1) c=(0,1) d=(1,-1); cosines: ab = ad = bc = 1/√2, ac = 0, cd = -1/√2, bd = 0
VEC = {"a": (1.0, 0.0), "b": (1.0, 1.0), "c": (0.0, 1.0), "d": (1.0, -1.0)}


def ev(word):
    return {"subj": None, "verb": word, "obj": None}


def pair(task, item, block, a, b, score, extra=None):
    return {"dataset": "hand", "item_id": item, "task": task, "block_id": block, "event_a": ev(a), "event_b": ev(b),
            "score": score, "extra": json.dumps(extra) if extra else None}


def mcnc_block(block, context, gold, negatives):
    rows = []
    for i, cand in enumerate([gold] + negatives):
        rows.append(pair("mcnc", f"{block}:{i}", block, context[-1], cand, 1.0 if i == 0 else 0.0,
                         {"context": [ev(c) for c in context], "candidate": i}))
    return rows


HAND_ROWS = [
    # hard: B1 sim ab .707 > dis ac 0 (right); B2 sim ac 0 < dis bc .707 (wrong); B3 sim ab = dis bc (tie: wrong)
    pair("hard_similarity", "h1s", "B1", "a", "b", 1.0), pair("hard_similarity", "h1d", "B1", "a", "c", 0.0),
    pair("hard_similarity", "h2d", "B2", "b", "c", 0.0), pair("hard_similarity", "h2s", "B2", "a", "c", 1.0),
    pair("hard_similarity", "h3s", "B3", "a", "b", 1.0), pair("hard_similarity", "h3d", "B3", "b", "c", 0.0),
    # transitive: cos = [1, .707, 0, .707] vs human [7, 5, 2, 1]
    pair("transitive_similarity", "t1", None, "a", "a", 7.0), pair("transitive_similarity", "t2", None, "a", "b", 5.0),
    pair("transitive_similarity", "t3", None, "a", "c", 2.0), pair("transitive_similarity", "t4", None, "a", "d", 1.0),
    # MCNC: M1 context [a, c], gold b: (.707+.707)/2 = .707 > neg a (1+0)/2 = .5, neg d (.707-.707)/2 = 0 -> right
    *mcnc_block("M1", ["a", "c"], "b", ["a", "d"]),
    # M2 context [a]: gold c 0 < neg b .707 -> wrong
    *mcnc_block("M2", ["a"], "c", ["b"]),
    # M3 context [a]: gold b .707 = neg d .707 -> tie -> wrong
    *mcnc_block("M3", ["a"], "b", ["d"]),
]


def dict_embed(calls):
    def embed(texts):
        calls.append(list(texts))
        return np.array([VEC[t] for t in texts])

    return embed


def test_event_pairs_hand():
    table = pa.Table.from_pylist(HAND_ROWS, schema=EVENT_PAIRS)
    calls = []
    rows = evaluate_event_pairs(table, dict_embed(calls), dataset="hand", method="m", seed=3, representation="r")
    assert calls == [["a", "b", "c", "d"]]  # one call, each distinct text once, first-seen order
    got = by_metric(rows)
    assert got["hard_sim_acc"] == pytest.approx(1 / 3)  # B1 only
    # Spearman: x ranks [4, 2.5, 1, 2.5], y ranks [4, 3, 2, 1], both mean 2.5
    # dx = [1.5, 0, -1.5, 0], dy = [1.5, .5, -.5, -1.5]: cov = 2.25 + .75 = 3; Σdx² = 4.5; Σdy² = 5
    assert got["transitive_spearman"] == pytest.approx(3 / math.sqrt(22.5))
    assert got["mcnc_acc"] == pytest.approx(1 / 3)  # M1 only
    assert got["mcnc_random"] == pytest.approx((1 / 3 + 1 / 2 + 1 / 2) / 3)  # 3, 2, 2 candidates -> 4/9
    assert {r["task"] for r in rows} == {"similarity"}
    assert {(r["setting"], r["method"], r["seed"], r["representation"], r["clustering"]) for r in rows} == {
        ("{subj} {verb} {obj}", "m", 3, "r", None)}
    # the metric name of the extended hard set: from the dataset name, or given
    ext = by_metric(evaluate_event_pairs(table.slice(0, 6), dict_embed([]), dataset="hard_ext", method="m", seed=0))
    assert ext == {"hard_sim_ext_acc": pytest.approx(1 / 3)}
    named = evaluate_event_pairs(table.slice(0, 6), dict_embed([]), dataset="x", method="m", seed=0, hard_metric="h")
    assert [r["metric"] for r in named] == ["h"]


def test_event_pairs_lower_template_setting():
    table = pa.Table.from_pylist([pair("hard_similarity", "s", "B", "A", "B", 1.0),
                                  pair("hard_similarity", "d", "B", "A", "C", 0.0)], schema=EVENT_PAIRS)
    calls = []
    rows = evaluate_event_pairs(table, dict_embed(calls), lower=True, template="{verb}", dataset="h", method="m", seed=0)
    assert calls == [["a", "b", "c"]] and rows[0]["setting"] == "{verb} (lower-cased)" and rows[0]["value"] == 1.0


def test_event_pairs_bad_input():
    table = pa.Table.from_pylist(HAND_ROWS[:6], schema=EVENT_PAIRS)
    ok = dict_embed([])
    two_similar = pa.Table.from_pylist([pair("hard_similarity", "x", "B", "a", "b", 1.0),
                                        pair("hard_similarity", "y", "B", "a", "c", 1.0)], schema=EVENT_PAIRS)
    with pytest.raises(ValueError, match="block 'B' has 2 rows with 2 similar"):
        evaluate_event_pairs(two_similar, ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="expected 1.0 .* or 0.0"):
        evaluate_event_pairs(pa.Table.from_pylist([pair("mcnc", "x", "M", "a", "b", 0.5, {"context": [ev("a")]})],
                                                  schema=EVENT_PAIRS), ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="non-empty 'context'"):
        evaluate_event_pairs(pa.Table.from_pylist([pair("mcnc", "x", "M", "a", "b", 1.0)], schema=EVENT_PAIRS),
                             ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="has 1 candidates with 1 held-out"):
        evaluate_event_pairs(pa.Table.from_pylist(mcnc_block("M", ["a"], "b", [])[:1], schema=EVENT_PAIRS),
                             ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="returned shape"):
        evaluate_event_pairs(table, lambda texts: np.ones((1, 2)), dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="all zeros"):
        evaluate_event_pairs(table, lambda texts: np.zeros((len(texts), 2)), dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="unknown task"):
        evaluate_event_pairs(table.set_column(2, "task", pa.array(["nli"] * 6)), ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="lacks column"):
        evaluate_event_pairs(table.drop_columns(["block_id"]), ok, dataset="h", method="m", seed=0)
    with pytest.raises(ValueError, match="empty"):
        evaluate_event_pairs(table.slice(0, 0), ok, dataset="h", method="m", seed=0)
    nulls = pa.Table.from_pylist([{**HAND_ROWS[0], "event_a": ev(None)}, HAND_ROWS[1]], schema=EVENT_PAIRS)
    with pytest.raises(ValueError, match="item 'h1s' \\(event_a\\).*every field null"):
        evaluate_event_pairs(nulls, ok, dataset="h", method="m", seed=0)


# Samples: a bag-of-words embedding in which a few synonyms share a dimension. Bag of words
# alone fails hard similarity by design (the dissimilar pair shares 2 of 3 words, cos 2/3;
# the similar pair none, cos 0); the synonyms fix blocks 1 and 2 (similar pair identical,
# cos 1 > 2/3) but not block 3 (company/firm not mapped): accuracy 2/3 in both layouts.
SYNONYMS = {"officers": "police", "detain": "arrest", "robber": "thief", "cook": "chef", "prepares": "cooks",
            "meal": "dinner"}


def bag_of_words(calls):
    def embed(texts):
        calls.append(len(texts))
        docs = [[SYNONYMS.get(w, w) for w in t.split()] for t in texts]
        vocab = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
        X = np.zeros((len(texts), len(vocab)))
        for i, d in enumerate(docs):
            for w in d:
                X[i, vocab[w]] += 1
        return X

    return embed


def test_event_pairs_on_shipped_samples(tmp_path):
    base = config.samples_dir() / "event_similarity"
    got = {}
    for reader, sample in [("hard_similarity", "hard_similarity/hard_quadruples_sample.txt"),
                           ("hard_similarity", "hard_similarity/hard_sim_sample.txt"),
                           ("transitive_similarity", "transitive_similarity"), ("mcnc", "mcnc")]:
        name = sample.split("/")[-1].removesuffix(".txt").removesuffix("_similarity")
        man = ingest(reader, base / sample, out_dir=tmp_path / name, dataset=name, progress=False)
        table = pq.read_table(tmp_path / name / "event_pairs.parquet")
        assert table.num_rows == man["rows"]["event_pairs"] and man["rejects"] == {}
        calls = []
        got[name] = by_metric(evaluate_event_pairs(table, bag_of_words(calls), dataset=name, method="bow", seed=0))
        assert len(calls) == 1
    assert got["hard_quadruples_sample"] == {"hard_sim_acc": pytest.approx(2 / 3)}
    assert got["hard_sim_sample"] == {"hard_sim_acc": pytest.approx(2 / 3)}
    # transitive: only "soldier fire gun" / "worker fire employee" share a word (fire): cos = [0, 1/3, 0, 0]
    # vs human [6.125, 1.5, 5.875, 3.25]. x ranks [2, 4, 2, 2], y ranks [4, 1, 3, 2], means 2.5;
    # dx = [-.5, 1.5, -.5, -.5], dy = [1.5, -1.5, .5, -.5]: cov = -.75 - 2.25 - .25 + .25 = -3;
    # Σdx² = 3, Σdy² = 5 -> ρ = -3/√15
    assert got["transitive"] == {"transitive_spearman": pytest.approx(-3 / math.sqrt(15))}
    # MCNC block 1: gold "police arrested suspect" vs context (investigated robbery / questioned
    # witnesses / identified suspect, all by police): (1/3 + 1/3 + 2/3)/3 = 4/9 > 0 for the 3 negatives;
    # block 2: gold "companies completed merger": (1/3 [merger] + 0)/2 = 1/6 > 0 for the 2 negatives.
    # Both right; random = (1/4 + 1/3)/2 = 7/24.
    assert got["mcnc"] == {"mcnc_acc": 1.0, "mcnc_random": pytest.approx(7 / 24)}
