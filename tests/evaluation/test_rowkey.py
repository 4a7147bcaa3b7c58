"""RowKey: the identity of a metric row, passed once to every evaluator. The rows it builds must be exactly the
rows the identity keywords built (same columns, same order, same values and types)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eventatlas.evaluation import METRIC_KEYS, RowKey, metric_rows

# the warehouse column order, written out: a row's keys must come in this order
COLS = ("task", "dataset", "split", "setting", "method", "representation", "clustering", "variant", "metric", "value",
        "seed")


def assert_rows(got, want):
    want = [dict(zip(COLS, w)) for w in want]
    assert [list(r) for r in got] == [list(COLS)] * len(want)
    assert [{**r, "value": None} for r in got] == [{**w, "value": None} for w in want]
    assert [r["value"] for r in got] == pytest.approx([w["value"] for w in want])
    assert all(type(r["value"]) is float and type(r["seed"]) is int for r in got)


def test_rowkey_fields_are_the_identity_columns():
    assert COLS == METRIC_KEYS
    assert {f.name for f in dataclasses.fields(RowKey)} == set(METRIC_KEYS) - {"task", "metric", "value"}
    key = RowKey("d", "m", 1)
    assert (key.split, key.setting, key.representation, key.clustering, key.variant) == (None,) * 5
    other = key.replace(split="test", variant="v")
    assert other == RowKey("d", "m", 1, split="test", variant="v") and key == RowKey("d", "m", 1)  # a copy
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.seed = 2
    with pytest.raises(TypeError):
        key.replace(algorithm="x")  # not a column
    with pytest.raises(TypeError, match="key must be a RowKey, got dict"):
        metric_rows({"ari": 1.0}, task="induction", key={"dataset": "d", "method": "m", "seed": 0})


def test_metric_rows_hand():
    key = RowKey("d", "m", np.int64(2), split="unseen", setting="10 seen", representation="trigger",
                 clustering="agglomerative", variant="ft")
    rows = metric_rows({"ari": 0.5, "nmi": 1, "purity": np.float32(0.25)}, task="induction", key=key,
                       only=["nmi", "ari"])
    assert_rows(rows, [
        ("induction", "d", "unseen", "10 seen", "m", "trigger", "agglomerative", "ft", "ari", 0.5, 2),
        ("induction", "d", "unseen", "10 seen", "m", "trigger", "agglomerative", "ft", "nmi", 1.0, 2),
    ])
    assert_rows(metric_rows({"hits@1": 0.75}, task="atlas", key=RowKey("a", "atlas", 0)),
                [("atlas", "a", None, None, "atlas", None, None, None, "hits@1", 0.75, 0)])


def test_evaluate_partitions_hand():
    from eventatlas.evaluation.clustering import evaluate_partitions

    y = ["a", "a", "b", "b"]
    parts = {("ft", "agglomerative"): [0, 0, 1, 1], (None, "manifold"): np.zeros(4, dtype=int)}
    # the key's clustering/variant are the partition's: the key's own are replaced
    key = RowKey("d", "m", 0, split="unseen", setting="2 seen", representation="trigger", clustering="x",
                 variant="y")
    # perfect partition: ARI = purity = 1; one cluster over two even types: ARI 0, purity 1/2
    assert_rows(evaluate_partitions(parts, y, key=key, only=["purity", "ari"]), [
        ("induction", "d", "unseen", "2 seen", "m", "trigger", "agglomerative", "ft", "ari", 1.0, 0),
        ("induction", "d", "unseen", "2 seen", "m", "trigger", "agglomerative", "ft", "purity", 1.0, 0),
        ("induction", "d", "unseen", "2 seen", "m", "trigger", "manifold", None, "ari", 0.0, 0),
        ("induction", "d", "unseen", "2 seen", "m", "trigger", "manifold", None, "purity", 0.5, 0),
    ])


def test_evaluate_retrieval_hand():
    from eventatlas.evaluation.retrieval import evaluate_retrieval

    # one query (1, 0): cosines x0 0, x1 1, x2 0.6 -> ranking x1 x2 x0, relevant {x0, x2}: flags 0 1 1
    # AP = (1/2 + 2/3) / 2 = 7/12, R-precision (R = 2) 1/2, p@1 0, p@2 1/2, recall@1 0, recall@2 1/2
    corpus = np.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])
    key = RowKey("d", "emr", 3, split="test", setting="k=1", representation="window4", variant="adhoc")
    assert_rows(evaluate_retrieval(np.array([[1.0, 0.0]]), corpus, [[0, 2]], ks=(1, 2), key=key), [
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "map", 7 / 12, 3),
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "r_precision", 0.5, 3),
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "p@1", 0.0, 3),
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "p@2", 0.5, 3),
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "recall@1", 0.0, 3),
        ("retrieval", "d", "test", "k=1", "emr", "window4", None, "adhoc", "recall@2", 0.5, 3),
    ])
