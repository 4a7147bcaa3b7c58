"""Evaluators (eventatlas.evaluation) on hand-computed cases: the arithmetic is in the comments."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.evaluation import METRIC_KEYS, RowKey
from eventatlas.evaluation.pairs import benchmark_pairs, evaluate_encoder_pairs, evaluate_event_pairs, event_text, hard_metric_name
from eventatlas.data.ingest import ingest
from eventatlas.schema import EVENT_PAIRS



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
    rows = evaluate_event_pairs(table, dict_embed(calls), key=RowKey("hand", "m", 3, representation="r"))
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
    ext = by_metric(evaluate_event_pairs(table.slice(0, 6), dict_embed([]), key=RowKey("hard_ext", "m", 0)))
    assert ext == {"hard_sim_ext_acc": pytest.approx(1 / 3)}
    named = evaluate_event_pairs(table.slice(0, 6), dict_embed([]), key=RowKey("x", "m", 0), hard_metric="h")
    assert [r["metric"] for r in named] == ["h"]


def test_encoder_pairs_one_row_set_per_pooling():
    # a fake encoder: "cls" gives the hand vectors, "mean" swaps the vectors of b and c; rows are labelled
    # sentence (mean) / cls, with the lower-cased setting (the default for encoders)
    class Fake:
        def __init__(self):
            self.calls = []

        def encode_sentences(self, texts, pooling="mean"):
            self.calls.append(pooling)
            swap = {"b": "c", "c": "b"} if pooling == "mean" else {}
            return np.array([VEC[swap.get(t, t)] for t in texts])

    table = pa.Table.from_pylist(HAND_ROWS[:6], schema=EVENT_PAIRS)
    fake = Fake()
    rows = evaluate_encoder_pairs(fake, table, poolings=("mean", "cls"), key=RowKey("hand", "m", 0))
    assert fake.calls == ["mean", "cls"]
    got = {(r["representation"], r["metric"]): r["value"] for r in rows}
    # mean (b=(0,1), c=(1,1)): B1 sim ab 0 < dis ac .707 wrong; B2 sim ac .707 = dis bc .707 tie wrong;
    # B3 sim ab 0 < dis bc .707 wrong -> 0. cls = the hand case -> 1/3
    assert got == {("sentence", "hard_sim_acc"): 0.0, ("cls", "hard_sim_acc"): pytest.approx(1 / 3)}
    assert {r["setting"] for r in rows} == {"{subj} {verb} {obj} (lower-cased)"}
    with pytest.raises(ValueError, match="pooling must be one of"):
        evaluate_encoder_pairs(fake, table, poolings=("max",), key=RowKey("hand", "m", 0))


def test_benchmark_pairs_leave_out_cooccurrence_counts():
    rows = HAND_ROWS[:2] + [pair("cooccurrence", "c1", None, "a", "b", 3.0)]
    table = pa.Table.from_pylist(rows, schema=EVENT_PAIRS)
    assert benchmark_pairs(table)["item_id"].to_pylist() == ["h1s", "h1d"]
    with pytest.raises(ValueError, match="unknown task"):  # unfiltered, the evaluator refuses them
        evaluate_event_pairs(table, dict_embed([]), key=RowKey("d", "m", 0))


def test_event_pairs_lower_template_setting():
    table = pa.Table.from_pylist([pair("hard_similarity", "s", "B", "A", "B", 1.0),
                                  pair("hard_similarity", "d", "B", "A", "C", 0.0)], schema=EVENT_PAIRS)
    calls = []
    rows = evaluate_event_pairs(table, dict_embed(calls), lower=True, template="{verb}", key=RowKey("h", "m", 0))
    assert calls == [["a", "b", "c"]] and rows[0]["setting"] == "{verb} (lower-cased)" and rows[0]["value"] == 1.0


def test_event_pairs_bad_input():
    table = pa.Table.from_pylist(HAND_ROWS[:6], schema=EVENT_PAIRS)
    ok = dict_embed([])
    two_similar = pa.Table.from_pylist([pair("hard_similarity", "x", "B", "a", "b", 1.0),
                                        pair("hard_similarity", "y", "B", "a", "c", 1.0)], schema=EVENT_PAIRS)
    with pytest.raises(ValueError, match="block 'B' has 2 rows with 2 similar"):
        evaluate_event_pairs(two_similar, ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="expected 1.0 .* or 0.0"):
        evaluate_event_pairs(pa.Table.from_pylist([pair("mcnc", "x", "M", "a", "b", 0.5, {"context": [ev("a")]})],
                                                  schema=EVENT_PAIRS), ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="non-empty 'context'"):
        evaluate_event_pairs(pa.Table.from_pylist([pair("mcnc", "x", "M", "a", "b", 1.0)], schema=EVENT_PAIRS),
                             ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="has 1 candidates with 1 held-out"):
        evaluate_event_pairs(pa.Table.from_pylist(mcnc_block("M", ["a"], "b", [])[:1], schema=EVENT_PAIRS),
                             ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="returned shape"):
        evaluate_event_pairs(table, lambda texts: np.ones((1, 2)), key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="all zeros"):
        evaluate_event_pairs(table, lambda texts: np.zeros((len(texts), 2)), key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="unknown task"):
        evaluate_event_pairs(table.set_column(2, "task", pa.array(["nli"] * 6)), ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="lacks column"):
        evaluate_event_pairs(table.drop_columns(["block_id"]), ok, key=RowKey("h", "m", 0))
    with pytest.raises(ValueError, match="empty"):
        evaluate_event_pairs(table.slice(0, 0), ok, key=RowKey("h", "m", 0))
    nulls = pa.Table.from_pylist([{**HAND_ROWS[0], "event_a": ev(None)}, HAND_ROWS[1]], schema=EVENT_PAIRS)
    with pytest.raises(ValueError, match="item 'h1s' \\(event_a\\).*every field null"):
        evaluate_event_pairs(nulls, ok, key=RowKey("h", "m", 0))


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
        got[name] = by_metric(evaluate_event_pairs(table, bag_of_words(calls), key=RowKey(name, "bow", 0)))
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


# ------------------------------------------------------------------ retrieval
# corpus x0=(1,0) x1=(.8,.6) x2=(0,1) x3=(-1,0) x4=(.6,.8), labels A B A B A
CORPUS = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0], [0.6, 0.8]], dtype=np.float32)
CORPUS_LABELS = ["A", "B", "A", "B", "A"]
# q0=(1,0) label A: cos 1, .8, 0, -1, .6 -> ranking 0 1 4 2 3, flags 1 0 1 1 0 (relevant {0, 2, 4})
#   AP = (1/1 + 2/3 + 3/4)/3 = 29/36; R-prec (R=3) = 2/3; P@1 = 1, P@2 = 1/2; R@1 = R@2 = 1/3
# q1=(0,5) label B (norm does not matter): cos 0, .6, 1, 0, .8 -> ranking 2 4 1 0 3 (x0 and x3 tie
#   at 0: corpus order), flags 0 0 1 0 1 (relevant {1, 3}): AP = (1/3 + 2/5)/2 = 11/30 (3 before 0
#   would give (1/3 + 2/4)/2 = 5/12); R-prec (R=2) = 0; P@1 = P@2 = 0; R@1 = R@2 = 0
QUERIES = np.array([[1, 0], [0, 5]], dtype=np.float32)
RETRIEVAL_EXPECTED = {"map": (29 / 36 + 11 / 30) / 2, "r_precision": (2 / 3 + 0) / 2, "p@1": 1 / 2, "p@2": 1 / 4,
                      "recall@1": 1 / 6, "recall@2": 1 / 6}


def test_retrieval_hand():
    from eventatlas.evaluation.retrieval import evaluate_retrieval, rank, relevance_from_labels

    relevant = relevance_from_labels(["A", "B"], CORPUS_LABELS)
    assert [r.tolist() for r in relevant] == [[0, 2, 4], [1, 3]]
    rows = evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(2, 1), key=RowKey("d", "m", 1, setting="1-shot"))
    assert by_metric(rows) == pytest.approx(RETRIEVAL_EXPECTED)
    assert [r["metric"] for r in rows] == ["map", "r_precision", "p@1", "p@2", "recall@1", "recall@2"]
    assert {(r["task"], r["setting"], r["seed"]) for r in rows} == {("retrieval", "1-shot", 1)}
    # one query per batch gives the same numbers
    tiny = evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(1, 2), key=RowKey("d", "m", 1), max_batch_bytes=1)
    assert by_metric(tiny) == pytest.approx(RETRIEVAL_EXPECTED)
    [(sl, ids, scores)] = list(rank(QUERIES, CORPUS))
    assert ids.tolist() == [[0, 1, 4, 2, 3], [2, 4, 1, 0, 3]]
    np.testing.assert_allclose(scores[0], [1, 0.8, 0.6, 0, -1], atol=1e-6)
    # top-k is a faiss search: same order
    assert next(rank(QUERIES, CORPUS, k=2))[1].tolist() == [[0, 1], [2, 4]]
    # exclude: q0 without x0 -> ranking 1 4 2 3, flags 0 1 1 0, relevant {2, 4}: AP = (1/2 + 2/3)/2 = 7/12,
    # R-prec = 1/2; q1 unchanged (11/30)
    ex = by_metric(evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(1,), exclude=[{0}, set()],
                                      key=RowKey("d", "m", 0)))
    assert ex["map"] == pytest.approx((7 / 12 + 11 / 30) / 2) and ex["r_precision"] == pytest.approx(1 / 4)
    # per-query scores (per-type MAP is built from them): the hand-computed values of q0 and q1
    per: list = []
    evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(1,), key=RowKey("d", "m", 0), per_query=per)
    assert [p["query"] for p in per] == [0, 1]
    assert [p["map"] for p in per] == pytest.approx([29 / 36, 11 / 30])
    assert [p["r_precision"] for p in per] == pytest.approx([2 / 3, 0]) and [p["p@1"] for p in per] == [1, 0]


def test_novel_trigger_recall_hand():
    """novel_recall@k: recall@k against the relevant items the query's words cannot find, averaged over the
    queries that have any. Rankings (test_retrieval_hand): q0 0 1 4 2 3 (relevant 0 2 4), q1 2 4 1 0 3."""
    from eventatlas.evaluation.retrieval import evaluate_retrieval, relevance_from_labels

    relevant = relevance_from_labels(["A", "B"], CORPUS_LABELS)
    # q0: items 2 and 4 are novel (rank 4 and 3); q1: item 0 is not relevant to it, so q1 has no novel item
    rows = by_metric(evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(1, 2, 3, 4), novel=[{2, 4}, {0}],
                                        key=RowKey("d", "m", 0)))
    assert rows["novel_queries"] == 1
    assert [rows[f"novel_recall@{k}"] for k in (1, 2, 3, 4)] == pytest.approx([0, 0, 1 / 2, 1])
    assert rows["map"] == pytest.approx(RETRIEVAL_EXPECTED["map"])  # the other metrics are untouched
    # two queries with novel items: the mean of theirs (q1's item 3 ranks 5th: 0 at k = 4)
    two = by_metric(evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(3, 4), novel=[{4}, {3}],
                                       key=RowKey("d", "m", 0)))
    assert two["novel_queries"] == 2 and two["novel_recall@3"] == pytest.approx((1 + 0) / 2)
    # no query with a novel item: no novel_recall entry at all (never a NaN row)
    none = by_metric(evaluate_retrieval(QUERIES, CORPUS, relevant, ks=(1,), novel=[set(), set()],
                                        key=RowKey("d", "m", 0)))
    assert none["novel_queries"] == 0 and not any(m.startswith("novel_recall") for m in none)
    with pytest.raises(ValueError, match="novel sets"):
        evaluate_retrieval(QUERIES, CORPUS, relevant, novel=[{2}], key=RowKey("d", "m", 0))


def test_retrieval_k_shot_is_mean_cosine():
    from eventatlas.evaluation.retrieval import evaluate_retrieval, query_vectors, rank, relevance_from_labels

    # shots (1,0) and (0,2): mean cosine to x0..x4 = (1+0)/2, (.8+.6)/2, (0+1)/2, (-1+0)/2, (.6+.8)/2
    #   = .5, .7, .5, -.5, .7 -> ranking 1 4 0 2 3 (ties by corpus index); label A relevant {0, 2, 4}:
    #   flags 0 1 1 1 0 -> AP = (1/2 + 2/3 + 3/4)/3 = 23/36; R-prec = 2/3; P@1 = 0
    shots = [np.array([[1, 0], [0, 2]], dtype=np.float32)]
    [(_, ids, scores)] = list(rank(shots, CORPUS))
    assert ids.tolist() == [[1, 4, 0, 2, 3]]
    np.testing.assert_allclose(scores[0], [0.7, 0.7, 0.5, 0.5, -0.5], atol=1e-6)
    got = by_metric(evaluate_retrieval(shots, CORPUS, relevance_from_labels(["A"], CORPUS_LABELS), ks=(1,),
                                       key=RowKey("d", "m", 0)))
    assert got == pytest.approx({"map": 23 / 36, "r_precision": 2 / 3, "p@1": 0.0, "recall@1": 0.0})
    # ragged shots, a (Q, S, d) array and single vectors agree with brute-force mean cosines
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 8))
    ragged = [rng.standard_normal((s, 8)) for s in (1, 3, 5)]
    brute = [(q / np.linalg.norm(q, axis=1, keepdims=True)) @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
             for q in ragged]
    [(_, ids, scores)] = list(rank(ragged, X))
    for i, b in enumerate(brute):
        np.testing.assert_allclose(scores[i], np.sort(b.mean(axis=0))[::-1], atol=1e-5)
    cube = rng.standard_normal((4, 3, 8))
    np.testing.assert_allclose(query_vectors(cube), query_vectors(list(cube)), atol=1e-6)
    np.testing.assert_allclose(query_vectors(cube[:, :1, :]), query_vectors(cube[:, 0, :]), atol=1e-6)


def test_retrieval_scores_function_and_multilabel():
    from eventatlas.evaluation.retrieval import evaluate_scores, relevance_from_labels

    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    S = unit(QUERIES) @ unit(CORPUS).T
    relevant = relevance_from_labels(["A", "B"], CORPUS_LABELS)
    got = evaluate_scores(S, relevant, ks=(1, 2), key=RowKey("d", "m", 0))
    assert by_metric(got) == pytest.approx(RETRIEVAL_EXPECTED)
    calls = []

    def score_fn(idx):
        calls.append(idx.tolist())
        return S[idx]

    got = evaluate_scores(score_fn, relevant, n_corpus=5, ks=(1, 2), key=RowKey("d", "m", 0), max_batch_bytes=1)
    assert by_metric(got) == pytest.approx(RETRIEVAL_EXPECTED) and calls == [[0], [1]]
    # multi-label corpus items are relevant to each of their labels
    rel = relevance_from_labels(["A", "B", "C"], [["A", "B"], "B", ("A",), "C", set()])
    assert [r.tolist() for r in rel] == [[0, 2], [0, 1], [3]]


def test_retrieval_bad_input():
    from eventatlas.evaluation.retrieval import evaluate_retrieval, evaluate_scores, relevance_from_labels

    rel = relevance_from_labels(["A", "B"], CORPUS_LABELS)
    kw = {"key": RowKey("d", "m", 0)}
    with pytest.raises(ValueError, match="query 1 has no relevant corpus item"):
        evaluate_retrieval(QUERIES, CORPUS, relevance_from_labels(["A", "Z"], CORPUS_LABELS), **kw)
    with pytest.raises(ValueError, match="2 queries but 1 relevance sets"):
        evaluate_retrieval(QUERIES, CORPUS, rel[:1], **kw)
    with pytest.raises(ValueError, match="dimension 3 but the corpus has 2"):
        evaluate_retrieval(np.ones((2, 3)), CORPUS, rel, **kw)
    with pytest.raises(ValueError, match="row 1 is all zeros"):
        evaluate_retrieval(np.array([[1.0, 0], [0, 0]]), CORPUS, rel, **kw)
    with pytest.raises(ValueError, match="out of range"):
        evaluate_retrieval(QUERIES, CORPUS, [[0, 9], [1]], **kw)
    with pytest.raises(ValueError, match="positive integer"):
        evaluate_retrieval(QUERIES, CORPUS, rel, ks=(0,), **kw)
    with pytest.raises(ValueError, match="needs n_corpus"):
        evaluate_scores(lambda idx: np.zeros((len(idx), 5)), rel, **kw)
    with pytest.raises(ValueError, match="NaN"):
        evaluate_scores(np.full((2, 5), np.nan), rel, **kw)
    with pytest.raises(ValueError, match="non-empty \\(S, d\\)"):
        evaluate_retrieval([np.ones((1, 2)), np.zeros((0, 2))], CORPUS, rel, **kw)


# ------------------------------------------------------------------ grounding
RANKED = [["e1", "p1", "r1", "x"], ["x", "e2", "p2"], ["e3"], ["y", "z"]]
GOLD = [{"e1", "p1", "r1"}, {"e2", "p2"}, {"e3"}, {"e4", "p4", "r4", "s4"}]
SCORES = [[0.9, 0.8, 0.4, 0.1], [0.7, 0.6, 0.2], [0.95], [0.5, 0.3]]


def test_grounding_hand():
    from eventatlas.evaluation.grounding import evaluate_grounding, grounding_scores

    got = grounding_scores(RANKED, GOLD, scores=SCORES, threshold=0.5, ks=(3, 1))
    # recall@1 (every gold id in the top 1): only m2 -> 1/4; recall@3: m0, m1, m2 (m3 never) -> 3/4
    assert got["recall@1"] == pytest.approx(1 / 4) and got["recall@3"] == pytest.approx(3 / 4)
    # recall@min: m0 top-3 3/3, m1 top-2 {x, e2} 1/2, m2 1/1, m3 top-4 {y, z} 0/4 -> (1 + .5 + 1 + 0)/4 = 5/8
    assert got["recall_at_min"] == pytest.approx(5 / 8)
    # top-|gold| set equal to gold: m0 and m2 -> 1/2
    assert got["strict_acc_top_min"] == pytest.approx(1 / 2)
    # threshold .5 predicts m0 {e1, p1}, m1 {x, e2}, m2 {e3}, m3 {y}; exact match m2 only -> 1/4
    assert got["strict_acc"] == pytest.approx(1 / 4)
    # micro: overlap 2+1+1+0 = 4, Σ|pred| = 6, Σ|gold| = 10 -> P 2/3, R 2/5, F = (8/15)/(16/15) = 1/2
    assert (got["micro_p"], got["micro_r"], got["micro_f1"]) == pytest.approx((2 / 3, 2 / 5, 1 / 2))
    # macro: P = (1 + 1/2 + 1 + 0)/4 = 5/8; R = (2/3 + 1/2 + 1 + 0)/4 = 13/24;
    # F = 2(5/8)(13/24)/(5/8 + 13/24) = (65/96)/(28/24) = 65/112
    assert (got["macro_p"], got["macro_r"], got["macro_f1"]) == pytest.approx((5 / 8, 13 / 24, 65 / 112))
    # atomic-only bound: mean 1/|gold| = (1/3 + 1/2 + 1 + 1/4)/4 = 25/48
    assert got["recall_at_min_atomic_bound"] == pytest.approx(25 / 48)
    # explicit predicted sets give the same set metrics; without either, no set metrics
    same = grounding_scores(RANKED, GOLD, predicted=[{"e1", "p1"}, {"x", "e2"}, {"e3"}, {"y"}], ks=(1, 3))
    assert same == pytest.approx(got)
    assert "strict_acc" not in grounding_scores(RANKED, GOLD, ks=(1,))
    rows = evaluate_grounding(RANKED, GOLD, ks=(1,), key=RowKey("wg", "m", 2, setting="zero-shot"))
    assert {(r["task"], r["setting"]) for r in rows} == {("grounding", "zero-shot")}
    assert [r["metric"] for r in rows] == ["recall@1", "recall_at_min", "strict_acc_top_min",
                                           "recall_at_min_atomic_bound"]


def test_grounding_bad_input():
    from eventatlas.evaluation.grounding import grounding_scores

    with pytest.raises(ValueError, match="4 ranked candidate lists but 3 gold"):
        grounding_scores(RANKED, GOLD[:3])
    with pytest.raises(ValueError, match="mention 1 has an empty gold set"):
        grounding_scores(RANKED[:2], [{"e1"}, set()])
    with pytest.raises(ValueError, match="repeat"):
        grounding_scores([["a", "a"]], [{"a"}])
    with pytest.raises(ValueError, match="best first"):
        grounding_scores([["a", "b"]], [{"a"}], scores=[[0.1, 0.9]], threshold=0.5)
    with pytest.raises(ValueError, match="threshold needs"):
        grounding_scores(RANKED, GOLD, threshold=0.5)
    with pytest.raises(ValueError, match="not both"):
        grounding_scores(RANKED, GOLD, scores=SCORES, threshold=0.5, predicted=GOLD)
    with pytest.raises(ValueError, match="2 candidates but 1 scores"):
        grounding_scores([["a", "b"]], [{"a"}], scores=[[0.1]])
    with pytest.raises(ValueError, match="at least one mention"):
        grounding_scores([], [])


# ------------------------------------------------------------------ clustering (induction)
def test_evaluate_partitions_hand():
    from eventatlas.evaluation.clustering import evaluate_partitions

    y = ["a", "a", "a", "b", "b", "c"]
    parts = {("ft", "agglomerative"): [0, 0, 1, 1, 1, 2], (None, "manifold"): np.zeros(6, dtype=int)}
    rows = evaluate_partitions(parts, y, key=RowKey("d", "m", 0, split="unseen", setting="10 seen",
                                                    representation="trigger"), only=["bcubed_f", "purity"])
    got = {(r["variant"], r["clustering"], r["metric"]): r["value"] for r in rows}
    # first: contingency a=[2,1,0] b=[0,2,0] c=[0,0,1]: B³ P = R = 7/9 (tests/evaluation/test_metrics.py), purity (2+2+1)/6
    # one cluster: purity 3/6; B³ P = (9+4+1)/36 = 7/18, R = 1, F = 2(7/18)/(25/18) = 14/25
    assert got == pytest.approx({("ft", "agglomerative", "bcubed_f"): 7 / 9, ("ft", "agglomerative", "purity"): 5 / 6,
                                 (None, "manifold", "bcubed_f"): 14 / 25, (None, "manifold", "purity"): 1 / 2})
    assert {(r["task"], r["split"], r["setting"], r["representation"]) for r in rows} == {
        ("induction", "unseen", "10 seen", "trigger")}
    with pytest.raises(ValueError, match="5 items but y_true has 6"):
        evaluate_partitions({(None, "affinity"): [0] * 5}, y, key=RowKey("d", "m", 0))
    with pytest.raises(ValueError, match="\\(variant, algorithm\\) pairs"):
        evaluate_partitions({"agglomerative": [0] * 6}, y, key=RowKey("d", "m", 0))


def two_groups():
    # two tight groups of unit-ish vectors around (1, 0) and (0, 1)
    X = np.array([[1, 0.02], [1, -0.02], [1, 0], [0.02, 1], [-0.02, 1], [0, 1]], dtype=np.float64)
    return X, ["a", "a", "a", "b", "b", "b"]


def test_cluster_and_score_features_and_skips(monkeypatch):
    from eventatlas.evaluation.clustering import cluster_and_score

    X, y = two_groups()
    res = cluster_and_score(X, y, key=RowKey("d", "untuned", 0, representation="trigger"), only=["ari"])
    assert set(res.partitions) == {(None, a) for a in ("agglomerative", "manifold", "manifold_sym", "affinity")}
    assert res.partitions[(None, "agglomerative")].tolist() == [0, 0, 0, 1, 1, 1]  # n_clusters = 2 gold types
    ari = {r["clustering"]: r["value"] for r in res.rows}
    assert ari["agglomerative"] == 1.0 and set(ari) == {"agglomerative", "manifold", "manifold_sym", "affinity"}
    assert set(res.seconds) == set(res.partitions) and res.skipped == {}
    # affinity over its ceiling (DenseSizeError) or over the byte budget (DenseBudgetError): skipped, others kept
    monkeypatch.setenv("EVENTATLAS_MAX_AFFINITY_N", "3")
    res = cluster_and_score(X, y, algorithms=("agglomerative", "affinity"), key=RowKey("d", "m", 0))
    assert list(res.partitions) == [(None, "agglomerative")]
    assert "EVENTATLAS_MAX_AFFINITY_N" in res.skipped[(None, "affinity")]
    monkeypatch.delenv("EVENTATLAS_MAX_AFFINITY_N")
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_BYTES", "100")
    res = cluster_and_score(X, y, algorithms=("affinity",), key=RowKey("d", "m", 0))
    assert res.partitions == {} and res.rows == [] and "EVENTATLAS_MAX_DENSE_BYTES" in res.skipped[(None, "affinity")]
    from eventatlas.cluster.guards import DenseBudgetError

    with pytest.raises(DenseBudgetError):  # skip=() lets the error through
        cluster_and_score(X, y, algorithms=("affinity",), key=RowKey("d", "m", 0), skip=())


def test_cluster_and_score_precomputed_variants():
    from eventatlas.evaluation.clustering import cluster_and_score, cluster_partitions

    X, y = two_groups()
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = U @ U.T
    # 1 - S and -S differ by a constant: every algorithm must give the same partition (the manifold
    # ones see -S shifted to be non-negative); k_manifold above N is capped
    res = cluster_and_score({"one_minus": 1 - S, "neg": -S}, y, metric="precomputed", k_manifold=100,
                            key=RowKey("d", "batch_attention", 0), only=["ari"])
    for algorithm in ("agglomerative", "manifold", "manifold_sym", "affinity"):
        np.testing.assert_array_equal(res.partitions[("one_minus", algorithm)], res.partitions[("neg", algorithm)])
    assert {r["variant"] for r in res.rows} == {"one_minus", "neg"}
    assert next(r["value"] for r in res.rows if r["variant"] == "neg" and r["clustering"] == "agglomerative") == 1.0
    with pytest.raises(ValueError, match="unknown clustering algorithm"):
        cluster_partitions(X, 2, algorithms=("kmeans",))
    with pytest.raises(ValueError, match="has 6 rows but y_true has 5"):
        cluster_and_score(X, y[:5], key=RowKey("d", "m", 0))
