"""SWCC training events: the distinct (subject, verb, object) events of an ``event_cooccurrence``
dataset (e.g. the ``event_tuples`` reader) rendered as text, and their co-occurring partners.

``load_events(dataset_dir, template=..., lower=True, max_events=None, seed=0) -> Events``:

* events = the distinct texts of the mentions' ``extra.svo`` under ``template`` (the same
  :func:`eventatlas.evaluation.pairs.event_text` the benchmarks use, so training and evaluation see one
  rendering); two (s, v, o) that render to one text are one event;
* partners = the ``event_pairs`` rows of task ``cooccurrence`` between two distinct events (counts of the
  same text pair summed), as a CSR adjacency (``indptr``, ``indices``, ``counts``) over event indices;
* ``exclude_docs``: documents of the run's own dataset kept out of training (a dev set's held-out documents,
  e.g. the ``nyt_cloze_dev`` reader's): their mentions are not read (an event seen only there is no training
  event) and their pairs are taken off the stored counts (the ``event_tuples`` reader's own rule,
  :func:`eventatlas.readers.event_tuples.count_pairs` with the dataset's ``max_pair_events``), so the
  counts are those of the kept documents alone; recorded as ``excluded_documents``;
* ``max_events``: a seeded subsample (recorded): whole documents in a seeded order until ``max_events``
  distinct events (the last document cut), so co-occurring pairs survive; pairs leaving it are dropped;
* ``weights`` (:func:`pair_weights`, ``weighting``): ``"minmax"`` (SWCC's ``w``, the paper) = the
  co-occurrence count of every stored pair min-max normalised over the whole table (every count equal ->
  1.0, recorded); it gives 0 to every pair at the minimum count, i.e. to the ~97% of NYT pairs seen in one
  document, which switches the weak term nearly off on small corpora. ``"log"`` = ``log(1 + c) /
  log(1 + c_max)`` (a once-co-occurring pair gets ``log 2 / log(1 + c_max) > 0``, the most frequent 1.0);
  ``"uniform"`` = 1.0 for every pair.

Memory: O(events + pairs); the pair table is read column-wise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np

from ..evaluation.pairs import DEFAULT_TEMPLATE, event_text

COOCCURRENCE_TASK = "cooccurrence"

__all__ = ["Events", "WEIGHTINGS", "load_events", "minmax", "pair_weights"]

WEIGHTINGS = ("minmax", "log", "uniform")


@dataclass
class Events:
    texts: list[str]
    indptr: np.ndarray  # (n + 1,) CSR over partners
    indices: np.ndarray  # partner event index per stored pair (both directions)
    counts: np.ndarray  # co-occurrence count per stored pair
    weights: np.ndarray  # min-max normalised count per stored pair
    record: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def sample_partner(self, i: int, rng: np.random.Generator) -> tuple[int, float]:
        """One co-occurring event of ``i`` drawn with probability proportional to the count, and the
        pair's weight; ``(i, 0.0)`` (itself, no weight) when ``i`` has no partner."""
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        if a == b:
            return i, 0.0
        c = self.counts[a:b]
        k = a + int(rng.choice(b - a, p=c / c.sum()))
        return int(self.indices[k]), float(self.weights[k])


def minmax(counts: np.ndarray) -> tuple[np.ndarray, bool]:
    """(min-max normalised counts, degenerate) where degenerate = every count equal (-> all 1.0)."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size == 0:
        return counts, True
    lo, hi = counts.min(), counts.max()
    if hi == lo:
        return np.ones_like(counts), True
    return (counts - lo) / (hi - lo), False


def pair_weights(counts: np.ndarray, weighting: str = "minmax") -> tuple[np.ndarray, bool]:
    """(weight per pair, degenerate) for co-occurrence ``counts`` (>= 1) under ``weighting`` (module doc);
    degenerate = every count equal under minmax or log (then 1.0 everywhere; always False for uniform)."""
    counts = np.asarray(counts, dtype=np.float64)
    if weighting == "minmax":
        return minmax(counts)
    if weighting == "uniform":
        return np.ones_like(counts), False
    if weighting == "log":
        if counts.size and counts.min() <= 0:
            raise ValueError(f"log weighting needs co-occurrence counts >= 1, got min {counts.min()}")
        if counts.size == 0 or counts.min() == counts.max():
            return np.ones_like(counts), True
        return np.log1p(counts) / np.log1p(counts.max()), False
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


def _read_events(d: Path, template: str, lower: bool, index: dict[str, int], by_svo: dict[tuple, int],
                 exclude: frozenset[str] = frozenset()) -> tuple[dict[str, list[int]], dict[str, list[tuple]]]:
    """({doc_id: event indices in order}, {excluded doc_id: its (s, v, o) keys in order}) of one dataset's
    mentions; new texts of the kept documents are added to ``index``."""
    from ..data.manifest import read_table

    m = read_table(d, "mentions", columns=["mention_id", "doc_id", "extra"])
    doc_events: dict[str, list[int]] = {}
    held: dict[str, list[tuple]] = {}
    for mid, doc, extra in zip(m["mention_id"].to_pylist(), m["doc_id"].to_pylist(), m["extra"].to_pylist()):
        try:
            svo = json.loads(extra or "{}")["svo"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{d / 'mentions.parquet'}: mention {mid!r} has no extra.svo (not an event-tuple "
                             "dataset? ingest it with the event_tuples reader)") from None
        key = (svo.get("subj"), svo.get("verb"), svo.get("obj"))
        if doc in exclude:
            held.setdefault(doc, []).append(key)
            continue
        if key not in by_svo:
            by_svo[key] = index.setdefault(event_text(svo, template, lower=lower), len(index))
        doc_events.setdefault(doc, []).append(by_svo[key])
    return doc_events, held


def _heldout_counts(d: Path, held: dict[str, list[tuple]]) -> Counter:
    """The co-occurrence counts the excluded documents added to ``d``'s pair table (the reader's rule)."""
    from ..data.manifest import Manifest
    from ..readers.event_tuples import DEFAULT_MAX_PAIR_EVENTS, count_pairs

    cap = int(Manifest.read(d).options.get("max_pair_events", DEFAULT_MAX_PAIR_EVENTS))
    counts: Counter = Counter()
    for keys in held.values():
        count_pairs(counts, keys, cap)
    return counts


def _sample_documents(doc_events: dict[str, list[int]], max_events: int | None, seed: int) -> tuple[list[int], int]:
    """(distinct event indices in first-seen order, documents used): every event, or whole documents in a
    seeded order until ``max_events`` distinct events (the last document cut). A uniform sample of events
    would keep almost no co-occurring pair (a pair survives with probability (n / N)^2)."""
    chosen: dict[int, None] = {}
    if max_events is None:
        for evs in doc_events.values():
            for e in evs:
                chosen.setdefault(e, None)
        return list(chosen), len(doc_events)
    docs = list(doc_events)
    n_docs = 0
    for k in np.random.default_rng(seed).permutation(len(docs)):
        n_docs += 1
        for e in doc_events[docs[k]]:
            chosen.setdefault(e, None)
        if len(chosen) >= max_events:
            break
    return list(chosen)[:max_events], n_docs


def load_events(dataset_dir: str | Path, *, template: str = DEFAULT_TEMPLATE, lower: bool = True,
                max_events: int | None = None, seed: int = 0, weighting: str = "minmax",
                extra_dirs: Sequence[str | Path] = (), extra_max_events: int | None = None,
                exclude_docs: Iterable[str] = ()) -> Events:
    """The events and partners of ``dataset_dir`` (module doc), plus those of every ``extra_dirs`` dataset
    (e.g. FrameNet triples beside the NYT tuples): one event index over all of them (one text, one
    event), each dataset's pairs added; ``extra_max_events`` subsamples each extra dataset as
    ``max_events`` does the main one; ``exclude_docs``: documents of ``dataset_dir`` never trained on."""
    import pyarrow.compute as pc

    from ..data.manifest import read_table

    dirs = [Path(dataset_dir)] + [Path(x) for x in extra_dirs]
    index: dict[str, int] = {}
    by_svo: dict[tuple, int] = {}
    chosen: dict[int, None] = {}
    n_docs, per_source = 0, []
    exclude = frozenset(exclude_docs)
    held: dict[str, list[tuple]] = {}
    for k, d in enumerate(dirs):
        doc_events, held_here = _read_events(d, template, lower, index, by_svo, exclude if k == 0 else frozenset())
        if k == 0:
            held = held_here
        cap = max_events if k == 0 else extra_max_events
        kept, docs_used = _sample_documents(doc_events, cap, seed)
        new_here = sum(1 for e in kept if e not in chosen)
        chosen.update(dict.fromkeys(kept))
        n_docs += docs_used
        per_source.append({"dataset": d.name, "documents": len(doc_events), "documents_sampled": docs_used,
                           "events": len(kept), "events_new": new_here})
    texts = list(index)
    n_all = len(texts)
    keep = np.sort(np.fromiter(chosen, dtype=np.int64, count=len(chosen)))
    new = np.full(n_all, -1, dtype=np.int64)
    new[keep] = np.arange(len(keep))

    a_all, b_all, c_all = [], [], []
    removed = 0.0
    for k, d in enumerate(dirs):
        p = read_table(d, "event_pairs", columns=["task", "event_a", "event_b", "score"])
        p = p.filter(pc.equal(p["task"], COOCCURRENCE_TASK))

        def keys(col) -> list[tuple]:
            s = p[col].combine_chunks()
            return list(zip(s.field("subj").to_pylist(), s.field("verb").to_pylist(), s.field("obj").to_pylist()))

        def ids(ks: list[tuple]) -> np.ndarray:
            return np.array([new[by_svo[k]] if k in by_svo else -1 for k in ks], dtype=np.int64)

        ka, kb = keys("event_a"), keys("event_b")
        c = np.asarray(p["score"].to_pylist(), dtype=np.float64)
        if k == 0 and held:
            sub = _heldout_counts(d, held)
            minus = np.array([sub.get(ab, 0) for ab in zip(ka, kb)], dtype=np.float64)
            removed, c = float(minus.sum()), c - minus
            if removed != sum(sub.values()):
                raise ValueError(f"{d}: the excluded documents' pairs are not all in its pair table (ingested "
                                 "with another max_pair_events?)")
        a_all.append(ids(ka))
        b_all.append(ids(kb))
        c_all.append(c)
    a, b, c = np.concatenate(a_all), np.concatenate(b_all), np.concatenate(c_all)
    ok = (a >= 0) & (b >= 0) & (a != b) & (c > 0)
    a, b, c = a[ok], b[ok], c[ok]
    # sum counts of one unordered text pair (two (s, v, o) may render alike), then store both directions
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    n = len(keep)
    uniq, inv = np.unique(lo * n + hi, return_inverse=True)
    summed = np.bincount(inv.ravel(), weights=c, minlength=len(uniq))
    lo, hi = uniq // n, uniq % n
    w, degenerate = pair_weights(summed, weighting)
    src, dst = np.concatenate([lo, hi]), np.concatenate([hi, lo])
    cnt, wt = np.concatenate([summed, summed]), np.concatenate([w, w])
    order = np.argsort(src, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    with_partner = int((np.diff(indptr) > 0).sum())
    record = {"n_events_all": n_all, "n_events": n, "subsampled": n < n_all, "max_events": max_events,
              "n_documents_sampled": n_docs, "sources": per_source,
              "excluded_documents": {"requested": len(exclude), "found": len(held), "pair_counts_removed": removed},
              "extra_max_events": extra_max_events,
              "n_pairs": int(len(uniq)), "events_with_partner": with_partner, "template": template, "lower": lower,
              "weighting": weighting, "weights_degenerate": bool(degenerate),
              "count_max": float(summed.max()) if len(summed) else 0.0,
              "pairs_weight_zero": int((w == 0).sum()), "mean_weight": float(w.mean()) if len(w) else 0.0}
    return Events([texts[i] for i in keep], indptr, dst[order], cnt[order], wt[order], record)
