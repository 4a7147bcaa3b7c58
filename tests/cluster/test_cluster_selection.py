"""The cluster count when none is given: gold types when labelled, else the best cosine silhouette."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.cluster.selection import by_silhouette, edge_note, gold_types, n_clusters_for


def _mentions(path, labels):
    pq.write_table(pa.table({"mention_id": [str(i) for i in range(len(labels))], "labels": labels}), path)
    return path


def test_silhouette_of_two_identical_pairs_by_hand():
    # a, a' = (1, 0) and b, b' = (0, 1): cosine distance 0 inside a pair, 1 across.
    # k=2: every point a=0, b=1 -> s=1, mean 1.0. k=3: one pair stays whole (s=1 each), the other splits into
    # two singletons (s=0 by definition): mean (1 + 1 + 0 + 0) / 4 = 0.5.
    X = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    k, scores = by_silhouette(X, "agglomerative", grid=(2, 3))
    assert k == 2 and scores == pytest.approx({2: 1.0, 3: 0.5})


def test_three_separated_directions_give_three_clusters():
    rng = np.random.default_rng(0)
    centres = np.eye(8, dtype=np.float32)[:3]
    X = np.concatenate([c + 0.05 * rng.standard_normal((30, 8)).astype(np.float32) for c in centres])
    k, scores = by_silhouette(X, "agglomerative")
    assert k == 3 and scores[3] > max(v for c, v in scores.items() if c != 3)
    # a sample smaller than the data gives the same answer here, and the choice is seeded
    assert by_silhouette(X, "agglomerative", sample=60, seed=1)[0] == 3
    assert by_silhouette(X, "agglomerative", sample=60, seed=1) == by_silhouette(X, "agglomerative", sample=60, seed=1)


def test_gold_types_win_and_unlabelled_mentions_say_how_the_count_was_chosen(tmp_path):
    X = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], dtype=np.float32)
    labelled = _mentions(tmp_path / "a.parquet", [["Attack"], ["Attack"], ["Meet"], []])
    assert gold_types(labelled) == 2
    assert n_clusters_for(labelled, X, "agglomerative") == (2, "2 clusters: the number of gold types")
    bare = _mentions(tmp_path / "b.parquet", [[], [], [], []])
    k, how = n_clusters_for(bare, X, "agglomerative")
    assert k == 2 and how.startswith("2 clusters: no labels") and "2: 0.9" in how
    few = _mentions(tmp_path / "c.parquet", [[], []])
    assert n_clusters_for(few, X[:2], "agglomerative") == (1, "1 cluster: 2 mention(s) are too few to compare counts")


def test_a_count_at_the_grids_end_is_flagged(tmp_path):
    assert edge_note(100, {2: 0.1, 50: 0.2, 100: 0.3}).startswith("; the largest count tried")
    assert edge_note(50, {2: 0.1, 50: 0.3, 100: 0.2}) == "" and edge_note(2, {2: 0.5}) == ""
    # the two identical pairs: 2 is best, not the largest tried (3): no note
    X = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    _, how = n_clusters_for(_mentions(tmp_path / "m.parquet", [[]] * 4), X, "agglomerative")
    assert how.startswith("2 clusters") and "largest count tried" not in how
