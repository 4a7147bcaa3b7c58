"""Evaluation metrics: clustering, ranking/retrieval, multi-label typing, correlation.

Conventions
-----------
* Every function validates its input and raises ``ValueError`` with a clear message on
  empty input, length mismatches or impossible values (no silent NaN).
* Clustering labels may be any hashable values (ints, strings); ``-1`` in ``y_pred`` is
  an ordinary cluster id here (callers that use it as "noise" must drop those rows first).
* All scores are fractions in [0, 1] except where stated: ``ari`` lies in [-0.5, 1]
  (chance-corrected, negative = worse than chance), ``mean_rank`` is a rank (>= 1) and
  ``spearman`` is a correlation in [-1, 1].
* Cluster metrics that sklearn computes come from sklearn; the rest are vectorised
  over the (gold x predicted) contingency matrix, so they are O(N + G*C), never O(N^2).

Definitions that vary in the literature (what is implemented here):
* B-cubed (Bagga & Baldwin 1998, item-averaged): with n_ij = |gold_i ∩ pred_j|,
  P = (1/N) Σ_ij n_ij² / |pred_j|, R = (1/N) Σ_ij n_ij² / |gold_i|, F = 2PR / (P + R).
* purity = (1/N) Σ_j max_i n_ij; inverse_purity = (1/N) Σ_i max_j n_ij;
  purity_f = harmonic mean of the two (Amigó et al. call the Van Rijsbergen variant
  "F"; the contract here is the plain harmonic mean).
* avg_cluster_purity (ACP, as in the "seed 000" event-type-induction evaluation):
  unweighted mean over predicted clusters of (majority gold-type count / cluster size),
  so small clusters count as much as large ones (unlike purity).
* type_representation: (number of distinct gold types that are the majority type of at
  least one predicted cluster) / (number of gold types). A cluster whose majority is
  tied credits *every* tied type (the tie gives no reason to prefer one; this keeps the
  score independent of label names/order).
* Ranking: ranks are 1-based; ``np.inf`` marks "gold not retrieved" (counts as a miss
  for hits@k / MRR and makes ``mean_rank`` infinite). Ranked 0/1 relevance lists
  (``average_precision``, ``precision_at_k``, ``r_precision``) take R = ``n_relevant``, the
  number of relevant items that exist, so relevant items the list missed still count.
* Multi-label (fine-grained typing, Ling & Weld 2012): ``strict_accuracy`` = exact set
  match rate; ``prf_macro`` = "loose macro": precision averaged over examples with a
  non-empty prediction, recall over examples with a non-empty gold set, F1 = harmonic
  mean of those averages; ``prf_micro`` = "loose micro": pooled overlap counts.
"""
from __future__ import annotations

from typing import Hashable, Iterable, Sequence

import numpy as np
from scipy import sparse, stats
from sklearn import metrics as skm

__all__ = [
    "clustering_scores",
    "contingency",
    "bcubed",
    "purity",
    "inverse_purity",
    "purity_f",
    "avg_cluster_purity",
    "type_representation",
    "hits_at_k",
    "mean_rank",
    "mrr",
    "average_precision",
    "mean_average_precision",
    "map",
    "precision_at_k",
    "r_precision",
    "recall_at_k",
    "recall_at_min",
    "strict_accuracy",
    "prf_macro",
    "prf_micro",
    "spearman",
]


# --------------------------------------------------------------------------- helpers
def _codes(y: Sequence[Hashable]) -> np.ndarray:
    """Dense int codes of one label vector. A numpy array of numbers or strings goes through
    ``np.unique``; anything else is coded by the labels themselves, so ``1`` and ``"1"`` stay two
    labels and ``None`` is one (``np.asarray`` would turn ``[1, "1"]`` into two equal strings)."""
    if isinstance(y, np.ndarray) and y.dtype != object:
        if y.ndim != 1:
            raise ValueError(f"labels must be 1-D sequences, got shape {y.shape}")
        return np.unique(y, return_inverse=True)[1].ravel()
    seen: dict[Hashable, int] = {}
    try:
        return np.fromiter((seen.setdefault(v, len(seen)) for v in y), dtype=np.int64)
    except TypeError:  # an unhashable item: a row of a 2-D input
        raise ValueError(f"labels must be 1-D sequences of hashable values, got shape {np.shape(y)}") from None


def _labels(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """Encode both label vectors as dense ints 0..G-1 / 0..C-1, with validation."""
    t, p = _codes(y_true), _codes(y_pred)
    if t.shape[0] == 0:
        raise ValueError("clustering metrics need at least one item, got empty y_true/y_pred")
    if t.shape[0] != p.shape[0]:
        raise ValueError(f"y_true has {t.shape[0]} items but y_pred has {p.shape[0]}")
    return t, p


def contingency(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> sparse.csr_matrix:
    """Sparse (gold types x predicted clusters) count matrix n_ij (int64)."""
    t, p = _labels(y_true, y_pred)
    n = t.shape[0]
    m = sparse.coo_matrix((np.ones(n, dtype=np.int64), (t, p)), shape=(t.max() + 1, p.max() + 1))
    return m.tocsr()  # duplicates are summed by the conversion


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den else 0.0


def _hmean(a: float, b: float) -> float:
    return 2.0 * a * b / (a + b) if (a + b) > 0 else 0.0


# --------------------------------------------------------------------------- clustering
def bcubed(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> tuple[float, float, float]:
    """Item-averaged B-cubed (precision, recall, F1) from the contingency matrix."""
    c = contingency(y_true, y_pred)
    n = c.sum()
    sq = c.multiply(c).tocsr()  # n_ij²
    pred_size = np.asarray(c.sum(axis=0)).ravel()
    gold_size = np.asarray(c.sum(axis=1)).ravel()
    # Σ_ij n_ij²/|C_j| = Σ_j (Σ_i n_ij²)/|C_j|, same for recall over rows.
    p = float((np.asarray(sq.sum(axis=0)).ravel() / pred_size).sum() / n)
    r = float((np.asarray(sq.sum(axis=1)).ravel() / gold_size).sum() / n)
    return p, r, _hmean(p, r)


def purity(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> float:
    """(1/N) Σ over predicted clusters of the majority gold-type count."""
    c = contingency(y_true, y_pred)
    return float(c.max(axis=0).toarray().sum() / c.sum())


def inverse_purity(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> float:
    """(1/N) Σ over gold types of the largest share any one predicted cluster holds."""
    c = contingency(y_true, y_pred)
    return float(c.max(axis=1).toarray().sum() / c.sum())


def purity_f(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> float:
    """Harmonic mean of purity and inverse purity."""
    return _hmean(purity(y_true, y_pred), inverse_purity(y_true, y_pred))


def avg_cluster_purity(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> float:
    """Unweighted mean over predicted clusters of majority-type count / cluster size."""
    c = contingency(y_true, y_pred)
    maj = c.max(axis=0).toarray().ravel()
    size = np.asarray(c.sum(axis=0)).ravel()
    return float(np.mean(maj / size))


def type_representation(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> float:
    """Share of gold types that are the (possibly tied) majority type of >= 1 cluster."""
    c = contingency(y_true, y_pred).tocsc()
    maj = c.max(axis=0).toarray().ravel()  # per cluster
    coo = c.tocoo()
    # entries equal to their column's maximum are that cluster's majority types
    is_major = coo.data == maj[coo.col]
    represented = np.unique(coo.row[is_major])
    return float(represented.size / c.shape[0])


def clustering_scores(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> dict[str, float]:
    """All clustering metrics at once (see module docstring for definitions).

    Keys: ari, nmi (geometric), nmi_arithmetic, fmi, homogeneity, completeness, v_measure,
    bcubed_p, bcubed_r, bcubed_f, purity, inverse_purity, purity_f, avg_cluster_purity,
    type_representation, n_clusters (int).
    """
    t, p = _labels(y_true, y_pred)
    h, c, v = skm.homogeneity_completeness_v_measure(t, p)
    bp, br, bf = bcubed(t, p)
    pu, ipu = purity(t, p), inverse_purity(t, p)
    return {
        "ari": float(skm.adjusted_rand_score(t, p)),
        "nmi": float(skm.normalized_mutual_info_score(t, p, average_method="geometric")),
        "nmi_arithmetic": float(skm.normalized_mutual_info_score(t, p, average_method="arithmetic")),
        "fmi": float(skm.fowlkes_mallows_score(t, p)),
        "homogeneity": float(h),
        "completeness": float(c),
        "v_measure": float(v),
        "bcubed_p": bp,
        "bcubed_r": br,
        "bcubed_f": bf,
        "purity": pu,
        "inverse_purity": ipu,
        "purity_f": _hmean(pu, ipu),
        "avg_cluster_purity": avg_cluster_purity(t, p),
        "type_representation": type_representation(t, p),
        "n_clusters": int(p.max() + 1),
    }


# --------------------------------------------------------------------------- ranking
def _ranks(ranks: Iterable[float]) -> np.ndarray:
    r = np.asarray(list(ranks) if not isinstance(ranks, np.ndarray) else ranks, dtype=np.float64).ravel()
    if r.size == 0:
        raise ValueError("ranking metrics need at least one rank, got none")
    if np.isnan(r).any():
        raise ValueError("ranks contain NaN; use np.inf for 'not retrieved'")
    if (r < 1).any():
        bad = float(r[r < 1][0])  # a float, not numpy's "np.float64(0.5)" repr
        raise ValueError(f"ranks are 1-based, got {bad!r}")
    finite = r[np.isfinite(r)]
    if (finite != np.round(finite)).any():
        raise ValueError("ranks must be whole numbers (or np.inf for 'not retrieved')")
    return r


def _integer(value, name: str, minimum: int) -> int:
    """``value`` as an int if it is a whole number >= ``minimum``, else ValueError (also for inf,
    NaN, None and strings, which ``int()`` would refuse with another error or accept)."""
    try:
        ok = int(value) == value and value >= minimum
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        kind = "a positive" if minimum == 1 else "a non-negative"
        raise ValueError(f"{name} must be {kind} integer, got {value!r}")
    return int(value)


def _check_k(k: int) -> int:
    return _integer(k, "k", 1)


def hits_at_k(ranks: Iterable[float], k: int) -> float:
    """Share of queries whose gold item is ranked within the top ``k``."""
    r = _ranks(ranks)
    return float(np.mean(r <= _check_k(k)))


def mean_rank(ranks: Iterable[float]) -> float:
    """Mean 1-based rank (not a fraction; lower is better; inf if any gold is missing)."""
    return float(np.mean(_ranks(ranks)))


def mrr(ranks: Iterable[float]) -> float:
    """Mean reciprocal rank (1/inf = 0 for 'not retrieved')."""
    return float(np.mean(1.0 / _ranks(ranks)))


def _relevance(ranked_relevance: Sequence[bool | int], n_relevant: int | None) -> tuple[np.ndarray, int]:
    """Validated 0/1 flags (bool array) and R = ``n_relevant`` or, by default, the flags' count."""
    rel = np.asarray(list(ranked_relevance) if not isinstance(ranked_relevance, np.ndarray) else ranked_relevance)
    if rel.ndim != 1:
        raise ValueError(f"ranked_relevance must be 1-D, got shape {rel.shape}")
    if rel.size and rel.dtype != bool and not np.isin(rel, (0, 1)).all():
        raise ValueError("ranked_relevance must hold 0/1 (or bool) flags")
    rel = rel.astype(bool, copy=False)
    found = int(rel.sum())
    total = found if n_relevant is None else _integer(n_relevant, "n_relevant", 0)
    if total < found:
        raise ValueError(f"n_relevant={n_relevant} is smaller than the {found} relevant items in the list")
    return rel, total


def average_precision(ranked_relevance: Sequence[bool | int], n_relevant: int | None = None) -> float:
    """AP of one ranked list of 0/1 relevance flags.

    AP = (1/R) Σ_{k: rel_k} precision@k, where R = ``n_relevant`` (total relevant items,
    including any the list missed) or, by default, the number of relevant items in the list.
    A query with R = 0 has AP 0 (nothing could be found).
    """
    rel, total = _relevance(ranked_relevance, n_relevant)
    if total == 0:
        return 0.0
    hits = np.cumsum(rel)
    prec_at_hits = hits[rel] / (np.flatnonzero(rel) + 1.0)
    return float(prec_at_hits.sum() / total)


def mean_average_precision(
    ranked_relevances: Iterable[Sequence[bool | int]], n_relevant: Sequence[int] | None = None
) -> float:
    """Mean of :func:`average_precision` over queries."""
    lists = list(ranked_relevances)
    if not lists:
        raise ValueError("mean_average_precision needs at least one query")
    if n_relevant is not None and len(n_relevant) != len(lists):
        raise ValueError(f"{len(lists)} queries but {len(n_relevant)} n_relevant values")
    aps = [average_precision(r, None if n_relevant is None else n_relevant[i]) for i, r in enumerate(lists)]
    return float(np.mean(aps))


def precision_at_k(ranked_relevance: Sequence[bool | int], k: int) -> float:
    """P@k of one ranked list of 0/1 flags: (relevant items in the top ``k``) / k.

    A list shorter than ``k`` is padded with non-relevant items (trec_eval's convention), so
    P@k never rewards returning fewer items.
    """
    k = _check_k(k)
    rel, _ = _relevance(ranked_relevance, None)
    return float(rel[:k].sum() / k)


def r_precision(ranked_relevance: Sequence[bool | int], n_relevant: int | None = None) -> float:
    """R-precision of one ranked list of 0/1 flags: P@R with R = ``n_relevant`` (every relevant
    item, including any the list missed; default the list's count). Equals recall at R too.
    A query with R = 0 scores 0, as in :func:`average_precision`.
    """
    rel, total = _relevance(ranked_relevance, n_relevant)
    if total == 0:
        return 0.0
    return float(rel[:total].sum() / total)


def recall_at_k(ranked_ids: Sequence[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """|top-k ∩ gold| / |gold| for one query (duplicates in the ranking count once)."""
    g = set(gold)
    if not g:
        raise ValueError("recall needs a non-empty gold set")
    top = set(list(ranked_ids)[: _check_k(k)])
    return len(top & g) / len(g)


def recall_at_min(ranked_ids: Sequence[Hashable], gold: Iterable[Hashable]) -> float:
    """Recall@min (Ou et al. 2023, hierarchical event grounding): recall at k = |gold|."""
    g = set(gold)
    if not g:
        raise ValueError("recall needs a non-empty gold set")
    return recall_at_k(ranked_ids, g, len(g))


# --------------------------------------------------------------------------- multi-label
def _sets(pred_sets, gold_sets) -> tuple[list[set], list[set]]:
    ps = [set(p) for p in pred_sets]
    gs = [set(g) for g in gold_sets]
    if not gs:
        raise ValueError("multi-label metrics need at least one example, got none")
    if len(ps) != len(gs):
        raise ValueError(f"{len(ps)} predicted label sets but {len(gs)} gold label sets")
    return ps, gs


def strict_accuracy(pred_sets: Iterable[Iterable[Hashable]], gold_sets: Iterable[Iterable[Hashable]]) -> float:
    """Share of examples whose predicted label set equals the gold set exactly."""
    ps, gs = _sets(pred_sets, gold_sets)
    return sum(p == g for p, g in zip(ps, gs)) / len(gs)


def prf_macro(pred_sets, gold_sets) -> tuple[float, float, float]:
    """Loose macro (Ling & Weld 2012): per-example P (over examples with predictions) and
    R (over examples with gold labels), averaged; F1 is their harmonic mean."""
    ps, gs = _sets(pred_sets, gold_sets)
    precs = [len(p & g) / len(p) for p, g in zip(ps, gs) if p]
    recs = [len(p & g) / len(g) for p, g in zip(ps, gs) if g]
    prec = float(np.mean(precs)) if precs else 0.0
    rec = float(np.mean(recs)) if recs else 0.0
    return prec, rec, _hmean(prec, rec)


def prf_micro(pred_sets, gold_sets) -> tuple[float, float, float]:
    """Loose micro: P = Σ|p∩g| / Σ|p|, R = Σ|p∩g| / Σ|g|, F1 harmonic mean."""
    ps, gs = _sets(pred_sets, gold_sets)
    tp = sum(len(p & g) for p, g in zip(ps, gs))
    prec = _ratio(tp, sum(len(p) for p in ps))
    rec = _ratio(tp, sum(len(g) for g in gs))
    return prec, rec, _hmean(prec, rec)


# --------------------------------------------------------------------------- correlation
def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (ties get average ranks), in [-1, 1]."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.size != b.size:
        raise ValueError(f"spearman: x has {a.size} values but y has {b.size}")
    if a.size < 2:
        raise ValueError(f"spearman needs at least 2 pairs, got {a.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("spearman: inputs contain NaN or inf")
    if np.all(a == a[0]) or np.all(b == b[0]):
        raise ValueError("spearman is undefined when one input is constant")
    return float(stats.spearmanr(a, b).statistic)


# ``map`` is the customary name (ARCHITECTURE.md); defined last so nothing above sees
# the shadowed builtin.
map = mean_average_precision  # noqa: A001
