"""A narrative-cloze dev set built from HELD-OUT documents of an event-tuple file (the NYT open-IE tuples of
the ``event_tuples`` reader) -> ``documents`` (the held-out documents) and ``event_pairs`` of task ``mcnc``
(scored like Weber's chained MCNC: :func:`eventatlas.evaluation.pairs.evaluate_event_pairs`, ``mcnc_acc``).

The file is read by :func:`eventatlas.readers.event_tuples.read` itself (same document ids ``<file
stem>:<line>``, same rejects, distractors left out), so the held-out ``doc_id`` values are those of the
``event_tuples`` dataset of the same file; SWCC keeps every document of an evaluated dataset out of its
training (:func:`eventatlas.swcc.data.load_events`, ``exclude_docs``).

The rule (every choice a pure function of the file and the options, no global RNG):

1. A document's events = its distinct event texts (``subj verb obj``, absent slots dropped) in document
   order; it is *eligible* with at least 3 of them.
2. Held out: the ``max(min_heldout_docs, ceil(heldout_fraction * eligible))`` eligible documents with the
   smallest ``sha256("<seed>:<doc_id>")`` (all of them when fewer are eligible); defaults 10 %, at least 2:
   217 of the 2,161 NYT documents.
3. Per held-out document with ``m`` events: context length ``k = min(max_context, m - 1)``; the answer
   positions are ``questions_per_doc`` of ``k .. m-1`` drawn without replacement by a generator seeded
   with the document's hash (all of them when fewer). A question = the ``k`` events before the position
   (context, in order), the event at the position (the right answer), and ``negatives`` events drawn
   without replacement (same generator) from the distinct events of the OTHER held-out documents that do
   not occur in this document (fewer when fewer exist; a document with none gives no question, counted in
   ``stats["no_negatives"]``). Defaults: 8 context events, 5 questions a document, 4 negatives (5
   candidates), so 1,085 questions on the NYT file.

Rows: one per candidate, the right answer first (``score`` 1.0, negatives 0.0), ``block_id =
<doc_id>:<position>``, ``event_a`` = the last context event, ``extra = {context, candidate, n_candidates,
doc_id, position}`` (the ``mcnc`` reader's layout). Memory: O(file) (the documents are held to rank them).
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Iterator

import numpy as np

from ..io import Rejects
from . import event_tuples
from ._common import bump, dumps

DEFAULT_DATASET = "nyt_cloze_dev"
EXPECTED_TABLES = ("event_pairs",)  # ingest refuses a run that yields none
TASK = "mcnc"
DEFAULTS = {"heldout_fraction": 0.1, "min_heldout_docs": 2, "questions_per_doc": 5, "max_context": 8,
            "negatives": 4, "seed": 0}
MIN_EVENTS = 3  # two context events and the answer

__all__ = ["read", "DEFAULT_DATASET", "DEFAULTS", "doc_hash", "heldout_count"]


def doc_hash(doc_id: str, seed: int = 0) -> str:
    """The hex digest that ranks a document for holding out (and seeds its questions)."""
    return hashlib.sha256(f"{int(seed)}:{doc_id}".encode("utf-8")).hexdigest()


def heldout_count(eligible: int, fraction: float, minimum: int) -> int:
    """How many of ``eligible`` documents are held out (rule 2 of the module doc)."""
    return min(eligible, max(int(minimum), math.ceil(float(fraction) * eligible)))


def _documents(path, dataset: str, rejects: Rejects, stats: dict | None):
    """[(document row, [(text, svo)] distinct events in order)] in file order, via the event_tuples reader."""
    inner: dict = {}
    docs: dict[str, tuple[dict, dict[str, dict]]] = {}
    for table, row in event_tuples.read(path, dataset=dataset, rejects=rejects, stats=inner, max_pair_events=0):
        if table == "documents":
            docs[row["doc_id"]] = (row, {})
        elif table == "mentions":
            svo = json.loads(row["extra"])["svo"]
            docs[row["doc_id"]][1].setdefault(row["sentence"].lower(), svo)
    bump(stats, "source_documents", inner.get("documents", 0))
    bump(stats, "distractors", inner.get("distractors", 0))
    return [(r, list(evs.items())) for r, evs in docs.values()]


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None,
         heldout_fraction: float = DEFAULTS["heldout_fraction"], min_heldout_docs: int = DEFAULTS["min_heldout_docs"],
         questions_per_doc: int = DEFAULTS["questions_per_doc"], max_context: int = DEFAULTS["max_context"],
         negatives: int = DEFAULTS["negatives"], seed: int = DEFAULTS["seed"], **opts) -> Iterator[tuple[str, dict]]:
    q, k_max, n_neg, seed = int(questions_per_doc), int(max_context), int(negatives), int(seed)
    if not 0 < float(heldout_fraction) < 1 or q < 1 or k_max < 2 or n_neg < 1:
        raise ValueError("nyt_cloze_dev needs 0 < heldout_fraction < 1, questions_per_doc >= 1, max_context >= 2 "
                         f"and negatives >= 1 (got {heldout_fraction}, {q}, {k_max}, {n_neg})")
    docs = _documents(path, dataset, rejects, stats)
    eligible = [(doc_hash(r["doc_id"], seed), i) for i, (r, evs) in enumerate(docs) if len(evs) >= MIN_EVENTS]
    n_hold = heldout_count(len(eligible), heldout_fraction, min_heldout_docs)
    held = {i: h for h, i in sorted(eligible)[:n_hold]}
    bump(stats, "eligible_documents", len(eligible))
    bump(stats, "heldout_documents", n_hold)
    owner: dict[str, int] = {}  # the pool: each distinct event text of a held-out document -> (first) document
    svo_of: dict[str, dict] = {}
    for i in sorted(held):
        for text, svo in docs[i][1]:
            owner.setdefault(text, i)
            svo_of.setdefault(text, svo)
    pool = sorted(owner)
    for i in sorted(held):  # file order
        row, evs = docs[i]
        doc_id, own = row["doc_id"], {t for t, _ in evs}
        others = [t for t in pool if t not in own]
        if not others:
            bump(stats, "no_negatives")
            continue
        rng = np.random.default_rng(int(held[i][:16], 16))
        m = len(evs)
        k = min(k_max, m - 1)
        positions = sorted(int(p) for p in rng.choice(np.arange(k, m), size=min(q, m - k), replace=False))
        yield "documents", {**row, "dataset": dataset,
                            "extra": dumps({**json.loads(row["extra"] or "{}"), "questions": len(positions)})}
        for p in positions:
            context = [svo for _, svo in evs[p - k:p]]
            negs = [svo_of[others[int(j)]] for j in rng.choice(len(others), size=min(n_neg, len(others)),
                                                                replace=False)]
            cands = [evs[p][1]] + negs
            block = f"{doc_id}:{p}"
            for c, cand in enumerate(cands):
                yield "event_pairs", {"dataset": dataset, "item_id": f"{block}:{c}", "task": TASK, "block_id": block,
                                      "event_a": context[-1], "event_b": cand, "score": 1.0 if c == 0 else 0.0,
                                      "extra": dumps({"context": context, "candidate": c, "n_candidates": len(cands),
                                                      "doc_id": doc_id, "position": p})}
            bump(stats, "questions")
            bump(stats, "candidates", len(cands))
