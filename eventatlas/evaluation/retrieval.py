"""Ranked retrieval (task ``retrieval``): rank a corpus for each query, score the full ranking.

Metrics per query, averaged over queries (:mod:`eventatlas.evaluation.metrics`):
``map`` (average precision of the *full* ranking, R = every relevant corpus item),
``r_precision`` (P@R), ``p@k`` and ``recall@k`` for each k in ``ks``.

Ranking (:func:`rank`) is exact, over L2-normalised float32 vectors, so a score is a cosine: the
full ranking is a BLAS product and a stable argsort per batch of queries, a top-k a faiss
``IndexFlatIP`` search. A query may be one vector or several (k-shot: its score for an item is the
mean cosine over its shot vectors). Because mean_s(q̂_s · x̂) = (mean_s q̂_s) · x̂, a k-shot query is
searched as the single mean of its unit shot vectors: exact, and one search per query whatever k.
Ties in score are broken by corpus index (lower first), so rankings (and AP) are deterministic.
Queries are searched in batches sized so a batch's ranked ids and scores stay under
``max_batch_bytes``: memory is O(batch x N + N x d), never O(Q x N) or O(N²).

Relevance is given per query as corpus indices (:func:`relevance_from_labels` builds it from
labels); ``exclude`` leaves items out of a query's ranking (its own shots, or itself when the
queries are corpus items) and out of its relevant set.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Collection, Hashable, Iterable, Iterator, Sequence

import faiss
import numpy as np

from . import metrics as M
from ._vectors import unit_rows
from .base import RowKey, metric_rows

DEFAULT_KS = (1, 5, 10)
DEFAULT_MAX_BATCH_BYTES = 256 * 1024**2

__all__ = ["DEFAULT_KS", "query_vectors", "rank", "relevance_from_labels", "retrieval_scores",
           "evaluate_retrieval", "evaluate_scores"]


def query_vectors(queries) -> np.ndarray:
    """(Q, d) float32 search vectors: a unit vector per single-vector query, the mean of the unit
    shot vectors per k-shot query. ``queries``: a (Q, d) array, a (Q, S, d) array, or a sequence
    whose items are (d,) vectors or (S_i, d) shot arrays (S_i may differ)."""
    if isinstance(queries, np.ndarray) and queries.ndim == 2:
        return unit_rows(queries, "queries")
    if isinstance(queries, np.ndarray) and queries.ndim == 3:
        q, s, d = queries.shape
        if s == 0:
            raise ValueError("queries have zero shot vectors each")
        return unit_rows(queries.reshape(q * s, d), "query shot vectors").reshape(q, s, d).mean(axis=1)
    items = list(queries)
    if not items:
        raise ValueError("no queries")
    shots = [np.atleast_2d(np.asarray(x, dtype=np.float32)) for x in items]
    if any(s.ndim != 2 or s.shape[0] == 0 for s in shots):
        bad = next(i for i, s in enumerate(shots) if s.ndim != 2 or s.shape[0] == 0)
        raise ValueError(f"query {bad} must be a (d,) vector or a non-empty (S, d) array of shots, "
                         f"got shape {shots[bad].shape}")
    dims = {s.shape[1] for s in shots}
    if len(dims) != 1:
        raise ValueError(f"queries have different dimensions: {sorted(dims)}")
    flat = unit_rows(np.concatenate(shots), "query shot vectors")
    counts = np.array([s.shape[0] for s in shots])
    owner = np.repeat(np.arange(len(shots)), counts)
    out = np.zeros((len(shots), flat.shape[1]), dtype=np.float64)
    np.add.at(out, owner, flat)  # vectorised per-query sum of shot vectors
    return (out / counts[:, None]).astype(np.float32)


def _batch_rows(n_items: int, width: int, bytes_per_entry: int, max_batch_bytes: int) -> int:
    return max(1, min(n_items, int(max_batch_bytes // max(1, width * bytes_per_entry))))


def _break_ties(ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Re-order equal scores by corpus index (faiss gives no order for ties); only rows with ties."""
    tied = (scores[:, 1:] == scores[:, :-1]).any(axis=1)
    for r in np.flatnonzero(tied):
        order = np.lexsort((ids[r], -scores[r]))
        ids[r], scores[r] = ids[r][order], scores[r][order]
    return ids, scores


def rank(queries, corpus, *, k: int | None = None, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
         normalize: bool = True) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """Exact cosine ranking of ``corpus`` (N, d) for every query (see :func:`query_vectors`).

    Yields ``(query_slice, ids, scores)`` per batch of queries: ``ids`` (B, k) int64 corpus indices
    best first, ``scores`` (B, k) float32 cosines (mean cosines for k-shot queries). ``k`` defaults
    to N, the full ranking that MAP needs: that is one BLAS product per batch and a stable argsort
    (faiss's search with k = N keeps a k-heap per query and measured 3.4x slower at N = 100k).
    A top-k (k < N) is a faiss ``IndexFlatIP`` search; which of several items tied at the k-th
    score makes the cut is then faiss's choice. ``normalize=False`` ranks by the raw dot product of
    (Q, d) queries and the corpus (bi-encoders trained on dot scores, e.g. grounding).
    """
    if normalize:
        X, Q = unit_rows(corpus, "corpus"), query_vectors(queries)
    else:
        X = np.ascontiguousarray(np.asarray(corpus, dtype=np.float32))
        Q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if X.ndim != 2 or Q.ndim != 2:
            raise ValueError(f"normalize=False takes (Q, d) queries and an (N, d) corpus, got {Q.shape} and {X.shape}")
    if Q.shape[1] != X.shape[1]:
        raise ValueError(f"queries have dimension {Q.shape[1]} but the corpus has {X.shape[1]}")
    n = X.shape[0]
    k = n if k is None else min(M._check_k(k), n)
    if k < n:
        index = faiss.IndexFlatIP(X.shape[1])
        index.add(X)
        step = _batch_rows(Q.shape[0], k, 12, max_batch_bytes)  # float32 score + int64 id per entry
        for start in range(0, Q.shape[0], step):
            sl = slice(start, min(start + step, Q.shape[0]))
            scores, ids = index.search(np.ascontiguousarray(Q[sl]), k)
            ids, scores = _break_ties(ids, scores)
            yield sl, ids, scores
        return
    step = _batch_rows(Q.shape[0], n, 24, max_batch_bytes)  # scores, argsort ids and temporaries
    for start in range(0, Q.shape[0], step):
        sl = slice(start, min(start + step, Q.shape[0]))
        S = Q[sl] @ X.T
        ids = np.argsort(-S, axis=1, kind="stable")  # stable: ties by corpus index
        yield sl, ids, np.take_along_axis(S, ids, axis=1)


def relevance_from_labels(query_labels: Sequence[Hashable],
                          corpus_labels: Sequence[Hashable | Collection[Hashable]]) -> list[np.ndarray]:
    """Per query, the indices of the corpus items that share its label.

    A corpus label may be one label or a collection (list, tuple, set) of labels (multi-label
    items: relevant to every query of any of their labels). Queries with one label share one
    index array (no copy per query).
    """
    by_label: dict[Hashable, list[int]] = defaultdict(list)
    for i, lab in enumerate(corpus_labels):
        for one in (lab if isinstance(lab, (list, tuple, set, frozenset)) else (lab,)):
            by_label[one].append(i)
    arrays = {lab: np.asarray(ix, dtype=np.int64) for lab, ix in by_label.items()}
    empty = np.zeros(0, dtype=np.int64)
    return [arrays.get(q, empty) for q in query_labels]


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    ks = tuple(M._check_k(k) for k in ks)
    if not ks:
        raise ValueError("ks is empty: give at least one cut-off")
    return tuple(sorted(set(ks)))


def retrieval_scores(ranked: Iterable[tuple[slice, np.ndarray, np.ndarray]], relevant: Sequence[Collection[int]],
                     n_corpus: int, *, ks: Sequence[int] = DEFAULT_KS,
                     exclude: Sequence[Collection[int]] | None = None,
                     per_query: list[dict[str, float]] | None = None,
                     novel: Sequence[Collection[int]] | None = None) -> dict[str, float]:
    """Mean MAP, R-precision, P@k, Recall@k over queries from full rankings.

    ``ranked`` yields ``(query_slice, ids, scores)`` as :func:`rank` does (``ids`` must rank the
    whole corpus, else relevant items past the list count as missed). ``relevant[q]``: corpus
    indices relevant to query q; ``exclude[q]``: indices left out of q's ranking and relevant set.
    ``per_query``: a list that receives one ``{"query": q, "map", "r_precision", "p@k"...}`` per
    query (e.g. for per-type MAP).

    ``novel[q]``: the relevant items of query q that a surface match cannot find (few-shot retrieval:
    those whose trigger lemma differs from every example's). ``novel_recall@k`` is then recall@k
    against that set: the share of them in the top k. It is averaged over the queries that have any
    (``novel_queries`` counts them; with none, there is no ``novel_recall`` entry).
    """
    ks = _check_ks(ks)
    n_q = len(relevant)
    if n_q == 0:
        raise ValueError("no queries: the relevance list is empty")
    if exclude is not None and len(exclude) != n_q:
        raise ValueError(f"{n_q} queries but {len(exclude)} exclude sets")
    if novel is not None and len(novel) != n_q:
        raise ValueError(f"{n_q} queries but {len(novel)} novel sets")
    sums = defaultdict(float)
    n_novel = 0
    seen = np.zeros(n_q, dtype=bool)
    flag = np.zeros(n_corpus, dtype=bool)  # reused relevance buffer: O(N) once, not per query
    for sl, ids, _ in ranked:
        for row, q in enumerate(range(sl.start, sl.stop)):
            if q >= n_q:
                raise ValueError(f"ranking has query {q} but relevance covers {n_q} queries")
            rel = np.unique(np.asarray(list(relevant[q]) if not isinstance(relevant[q], np.ndarray) else relevant[q],
                                       dtype=np.int64))
            order = ids[row]
            if exclude is not None and len(exclude[q]):
                ex = np.asarray(list(exclude[q]), dtype=np.int64)
                order = order[~np.isin(order, ex)]
                rel = rel[~np.isin(rel, ex)]
            if rel.size and (rel[0] < 0 or rel[-1] >= n_corpus):
                raise ValueError(f"query {q}: relevant index out of range [0, {n_corpus})")
            if rel.size == 0:
                raise ValueError(f"query {q} has no relevant corpus item (after exclusions): its scores are undefined")
            flag[rel] = True
            flags = flag[order]
            flag[rel] = False
            n_rel = int(rel.size)
            one = {"map": M.average_precision(flags, n_rel), "r_precision": M.r_precision(flags, n_rel)}
            gold = set(rel.tolist())
            for k in ks:
                one[f"p@{k}"] = M.precision_at_k(flags[:k], k)
                one[f"recall@{k}"] = M.recall_at_k(order[:k].tolist(), gold, k)
            new = set(int(i) for i in novel[q]) & gold if novel is not None else set()
            if new:
                n_novel += 1
                for k in ks:
                    one[f"novel_recall@{k}"] = M.recall_at_k(order[:k].tolist(), new, k)
            for name, v in one.items():
                sums[name] += v
            if per_query is not None:
                per_query.append({"query": q, **one})
            seen[q] = True
    if not seen.all():
        raise ValueError(f"ranking covers {int(seen.sum())} of {n_q} queries")
    names = ["map", "r_precision"] + [f"p@{k}" for k in ks] + [f"recall@{k}" for k in ks]
    out = {name: sums[name] / n_q for name in names}
    if novel is not None:
        out["novel_queries"] = float(n_novel)
        if n_novel:  # undefined without a query that has one: no row rather than a NaN
            out.update({f"novel_recall@{k}": sums[f"novel_recall@{k}"] / n_novel for k in ks})
    return out


def evaluate_retrieval(
    queries,
    corpus,
    relevant: Sequence[Collection[int]],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    exclude: Sequence[Collection[int]] | None = None,
    key: RowKey,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    per_query: list[dict[str, float]] | None = None,
    novel: Sequence[Collection[int]] | None = None,
) -> list[dict[str, Any]]:
    """Rank ``corpus`` for each query (one vector or k-shot vectors, see :func:`query_vectors`)
    with :func:`rank` and return the rows of :func:`retrieval_scores` (task ``retrieval``, identity ``key``)."""
    n_corpus = int(np.shape(corpus)[0])
    n_q = len(queries)
    if len(relevant) != n_q:
        raise ValueError(f"{n_q} queries but {len(relevant)} relevance sets")
    scores = retrieval_scores(rank(queries, corpus, max_batch_bytes=max_batch_bytes), relevant, n_corpus,
                              ks=ks, exclude=exclude, per_query=per_query, novel=novel)
    return metric_rows(scores, task="retrieval", key=key)


def _score_source(scores: np.ndarray | Callable[[np.ndarray], np.ndarray], n_queries: int,
                  n_corpus: int | None) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """(function of query indices -> their scores, N), validated before any ranking starts."""
    if callable(scores):
        if n_corpus is None or int(n_corpus) < 1:
            raise ValueError(f"a score function needs n_corpus (a positive corpus size), got {n_corpus!r}")
        return scores, int(n_corpus)
    arr = np.asarray(scores)
    if arr.ndim != 2 or arr.shape[0] != n_queries or arr.shape[1] == 0:
        raise ValueError(f"scores must be a ({n_queries}, N) array with N >= 1, got shape {arr.shape}")
    if n_corpus is not None and n_corpus != arr.shape[1]:
        raise ValueError(f"n_corpus={n_corpus} but scores have {arr.shape[1]} columns")
    return (lambda idx: arr[idx]), arr.shape[1]


def _rank_scores(get: Callable[[np.ndarray], np.ndarray], n_queries: int, n_corpus: int,
                 max_batch_bytes: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    step = _batch_rows(n_queries, n_corpus, 16, max_batch_bytes)  # float64 score + int64 id
    for start in range(0, n_queries, step):
        sl = slice(start, min(start + step, n_queries))
        s = np.asarray(get(np.arange(sl.start, sl.stop)), dtype=np.float64)
        if s.shape != (sl.stop - sl.start, n_corpus):
            raise ValueError(f"scores for queries {sl.start}..{sl.stop - 1} have shape {s.shape}, "
                             f"expected ({sl.stop - sl.start}, {n_corpus})")
        if not np.isfinite(s).all():
            raise ValueError(f"scores for queries {sl.start}..{sl.stop - 1} contain NaN or inf")
        # stable sort of -score: ties keep corpus order, as in rank()
        ids = np.argsort(-s, axis=1, kind="stable")
        yield sl, ids, np.take_along_axis(s, ids, axis=1)


def evaluate_scores(
    scores: np.ndarray | Callable[[np.ndarray], np.ndarray],
    relevant: Sequence[Collection[int]],
    *,
    n_corpus: int | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    exclude: Sequence[Collection[int]] | None = None,
    key: RowKey,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    per_query: list[dict[str, float]] | None = None,
    novel: Sequence[Collection[int]] | None = None,
) -> list[dict[str, Any]]:
    """Like :func:`evaluate_retrieval` for scores that are not cosines of vectors (a cross-encoder,
    a learned scorer): ``scores`` is a (Q, N) array, or a function mapping an array of query
    indices to their (B, N) scores (called once per batch; then ``n_corpus`` is required).
    Higher scores rank first; ties by corpus index."""
    n_q = len(relevant)
    get, n = _score_source(scores, n_q, n_corpus)
    out = retrieval_scores(_rank_scores(get, n_q, n, max_batch_bytes), relevant, n, ks=ks, exclude=exclude,
                           per_query=per_query, novel=novel)
    return metric_rows(out, task="retrieval", key=key)
