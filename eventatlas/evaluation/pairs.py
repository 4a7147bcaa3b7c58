"""Event-pair similarity over an ``event_pairs`` table (task ``similarity``).

The table (schema ``eventatlas.schema.EVENT_PAIRS``, written by
:mod:`eventatlas.readers.event_similarity`) may hold any mix of three benchmarks, told apart
by its ``task`` column:

* ``hard_similarity`` (Weber et al. 2018; the extended set of Ding et al. 2019 has the same
  layout): blocks of two rows with one ``block_id``, ``score`` 1.0 for the similar pair
  (e1, e2) and 0.0 for the dissimilar one (e3, e4). A block is correct when
  cos(e1, e2) > cos(e3, e4) **strictly**: a tie counts as wrong (an embedding that cannot tell
  the pairs apart gets no credit). Metric ``hard_sim_acc``, or ``hard_sim_ext_acc`` for the
  extended set: the two sets share one file layout, so the name cannot come from the data; see
  :func:`hard_metric_name`.
* ``transitive_similarity`` (Kartsaklis & Sadrzadeh 2014): Spearman between cos(a, b) and the
  human score (1-7), metric ``transitive_spearman``.
* ``mcnc`` (multiple-choice narrative cloze): one row per candidate of a block, ``score`` 1.0
  for the held-out (true) event, ``extra`` JSON with the ``context`` events. A candidate's
  score is its mean cosine to the context events; the block is correct when the held-out
  event scores strictly above every other candidate (a tie is wrong: the reader puts the
  held-out event first, so "first of the tied" would favour it). Metrics ``mcnc_acc`` and
  ``mcnc_random`` (mean of 1/n_candidates: the accuracy of guessing).

Each distinct event text is embedded once (one call to ``embed``); vectors are L2-normalised,
so cosines are dot products. Memory is O(distinct texts x d + rows), never pairs x pairs.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
from scipy import sparse

from . import metrics as M
from ._vectors import unit_rows
from .base import RowKey, metric_rows

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = "{subj} {verb} {obj}"
SVO_FIELDS = ("subj", "verb", "obj")
PAIR_TASKS = ("hard_similarity", "transitive_similarity", "mcnc")
NULL_TOKEN = "_NULL_"  # open-IE tuples mark an absent slot with it (Weber et al.)

__all__ = ["DEFAULT_TEMPLATE", "PAIR_TASKS", "POOLING_REPRESENTATION", "event_text", "hard_metric_name", "evaluate_event_pairs",
           "evaluate_encoder_pairs", "benchmark_pairs"]


def _field(value: Any) -> str:
    if value is None:
        return ""
    s = str(value).strip()
    return "" if s.upper() == NULL_TOKEN else s


def event_text(svo: Mapping[str, Any] | None, template: str = DEFAULT_TEMPLATE, *, lower: bool = False) -> str:
    """The text of one (subj, verb, obj) event, e.g. ``"police arrest thief"``.

    ``template`` names the fields ``{subj}``, ``{verb}``, ``{obj}``. A field that is None, empty
    or ``_NULL_`` is left out cleanly: whitespace runs collapse to one space and the text is
    stripped (``{"subj": None, "verb": "arrest", "obj": "thief"}`` -> ``"arrest thief"``).
    ``lower`` lower-cases the result. An event without any text is an error.
    """
    if not isinstance(svo, Mapping):
        raise ValueError(f"an event must be a mapping with {SVO_FIELDS}, got {svo!r}")
    fields = {k: _field(svo.get(k)) for k in SVO_FIELDS}
    try:
        text = template.format(**fields)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"template {template!r} cannot be filled from the fields {SVO_FIELDS}: {e!r}") from None
    text = " ".join(text.split())
    if not text:
        raise ValueError(f"event {dict(svo)!r} has no text under template {template!r} (every field null)")
    return text.lower() if lower else text


def hard_metric_name(dataset: str) -> str:
    """Default hard-similarity metric name: ``hard_sim_ext_acc`` when the dataset name has an
    ``ext`` or ``extended`` token (``hard_similarity_ext``, ``hard-extended``), else ``hard_sim_acc``."""
    tokens = set(re.split(r"[^a-z0-9]+", str(dataset).lower()))
    return "hard_sim_ext_acc" if tokens & {"ext", "extended"} else "hard_sim_acc"


class _Texts:
    """Distinct texts in first-seen order, so ``embed`` sees each once."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))


def _require_columns(pairs: pa.Table, names: Sequence[str]) -> None:
    missing = [c for c in names if c not in pairs.column_names]
    if missing:
        raise ValueError(f"event_pairs table lacks column(s) {missing}; has {pairs.column_names}")


def _event_ids(events: list, texts: _Texts, template: str, lower: bool, items: list, what: str) -> np.ndarray:
    out = np.empty(len(events), dtype=np.int64)
    for i, ev in enumerate(events):
        try:
            out[i] = texts.add(event_text(ev, template, lower=lower))
        except ValueError as e:
            raise ValueError(f"event_pairs item {items[i]!r} ({what}): {e}") from None
    return out


def _blocks(block_ids: list, items: list, task: str) -> tuple[np.ndarray, int, np.ndarray]:
    """Block index of every row, the number of blocks and each block's first row."""
    if any(b is None for b in block_ids):
        bad = next(it for it, b in zip(items, block_ids) if b is None)
        raise ValueError(f"{task} row {bad!r} has no block_id")
    uniq, first, inv = np.unique(np.asarray(block_ids, dtype=object), return_index=True, return_inverse=True)
    return inv.ravel(), len(uniq), first


def _binary_scores(scores: np.ndarray, items: list, task: str) -> np.ndarray:
    bad = ~np.isin(scores, (0.0, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{task} row {items[i]!r} has score {scores[i]!r}; expected 1.0 (similar / held-out) or 0.0")
    return scores == 1.0


def _hard_accuracy(cos: np.ndarray, positive: np.ndarray, inv: np.ndarray, n_blocks: int, block_ids: list) -> float:
    n_rows = np.bincount(inv, minlength=n_blocks)
    n_pos = np.bincount(inv, weights=positive, minlength=n_blocks)
    bad = (n_rows != 2) | (n_pos != 1)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        name = block_ids[int(np.flatnonzero(inv == b)[0])]
        raise ValueError(f"hard_similarity block {name!r} has {n_rows[b]} rows with {int(n_pos[b])} similar; "
                         "expected one similar (1.0) and one dissimilar (0.0) pair")
    sim = np.bincount(inv, weights=np.where(positive, cos, 0.0), minlength=n_blocks)
    dis = np.bincount(inv, weights=np.where(positive, 0.0, cos), minlength=n_blocks)
    return float(np.mean(sim > dis))  # strict: a tie is wrong


def evaluate_event_pairs(
    pairs: pa.Table,
    embed: Callable[[list[str]], np.ndarray],
    *,
    template: str = DEFAULT_TEMPLATE,
    lower: bool = False,
    key: RowKey,
    hard_metric: str | None = None,
) -> list[dict[str, Any]]:
    """Score an embedding function on every similarity benchmark present in ``pairs``.

    ``embed(texts)`` gets the distinct event texts (built by :func:`event_text` with
    ``template``/``lower``) in one call and returns one vector per text. ``hard_metric`` names
    the hard-similarity accuracy (default :func:`hard_metric_name` of ``key.dataset``). Rows:
    task ``similarity``, ``key`` with setting = ``template`` (plus `` (lower-cased)`` when ``lower``).
    """
    _require_columns(pairs, ("item_id", "task", "block_id", "event_a", "event_b", "score", "extra"))
    if pairs.num_rows == 0:
        raise ValueError("event_pairs table is empty: nothing to evaluate")
    tasks = pairs["task"].to_pylist()
    unknown = sorted({t for t in tasks if t not in PAIR_TASKS}, key=str)
    if unknown:
        raise ValueError(f"event_pairs has unknown task(s) {unknown}; known: {PAIR_TASKS}")

    texts = _Texts()
    parts: dict[str, dict[str, Any]] = {}
    for task in PAIR_TASKS:
        mask = [t == task for t in tasks]
        if not any(mask):
            continue
        t = pairs.filter(pa.array(mask))
        items = t["item_id"].to_pylist()
        scores = np.asarray(t["score"].to_pylist(), dtype=np.float64)
        if np.isnan(scores).any():
            raise ValueError(f"{task} row {items[int(np.flatnonzero(np.isnan(scores))[0])]!r} has no score")
        part: dict[str, Any] = {"items": items, "scores": scores}
        if task != "mcnc":  # MCNC's event_a is its last context event: the full context is in extra
            part["a"] = _event_ids(t["event_a"].to_pylist(), texts, template, lower, items, "event_a")
        part["b"] = _event_ids(t["event_b"].to_pylist(), texts, template, lower, items, "event_b")
        if task == "mcnc":
            part["block_ids"] = t["block_id"].to_pylist()
            inv, n_blocks, first = _blocks(part["block_ids"], items, task)
            # the context is the same for every candidate of a block: read it from each block's first row
            extras = t["extra"].to_pylist()
            rows, cols, vals = [], [], []
            for b, r in enumerate(first):
                try:
                    ctx = json.loads(extras[r] or "{}").get("context")
                except (ValueError, AttributeError):
                    ctx = None
                if not isinstance(ctx, list) or not ctx:
                    raise ValueError(f"mcnc row {items[r]!r}: extra needs a non-empty 'context' list of events")
                ids = _event_ids(ctx, texts, template, lower, [items[r]] * len(ctx), "context")
                rows += [b] * len(ids)
                cols += ids.tolist()
                vals += [1.0 / len(ids)] * len(ids)
            part.update(inv=inv, n_blocks=n_blocks, ctx=(rows, cols, vals))
        elif task == "hard_similarity":
            part["block_ids"] = t["block_id"].to_pylist()
            part["inv"], part["n_blocks"], _ = _blocks(part["block_ids"], items, task)
        parts[task] = part

    text_list = list(texts.index)
    E = np.asarray(embed(text_list))
    if E.ndim != 2 or E.shape[0] != len(text_list):
        raise ValueError(f"embed returned shape {E.shape} for {len(text_list)} texts; expected ({len(text_list)}, d)")
    E = unit_rows(E, "embeddings of the event texts", dtype=np.float64)

    def cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", E[a], E[b])

    scores: dict[str, float] = {}
    if "hard_similarity" in parts:
        p = parts["hard_similarity"]
        positive = _binary_scores(p["scores"], p["items"], "hard_similarity")
        name = hard_metric or hard_metric_name(key.dataset)
        scores[name] = _hard_accuracy(cos(p["a"], p["b"]), positive, p["inv"], p["n_blocks"], p["block_ids"])
    if "transitive_similarity" in parts:
        p = parts["transitive_similarity"]
        c = cos(p["a"], p["b"])
        if np.ptp(c) == 0:
            # an encoder that maps every pair to the same cosine (e.g. all words unknown to it) has no
            # ranking: Spearman is undefined; say so instead of failing the whole evaluation
            log.warning("%s: every transitive pair has cosine %.6f: transitive_spearman left out", key.dataset,
                        c[0])
        else:
            scores["transitive_spearman"] = M.spearman(c, p["scores"])
    if "mcnc" in parts:
        p = parts["mcnc"]
        gold = _binary_scores(p["scores"], p["items"], "mcnc")
        inv, n_blocks = p["inv"], p["n_blocks"]
        n_cand = np.bincount(inv, minlength=n_blocks)
        n_gold = np.bincount(inv, weights=gold, minlength=n_blocks)
        bad = (n_gold != 1) | (n_cand < 2)
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            raise ValueError(f"mcnc block {p['block_ids'][int(np.flatnonzero(inv == b)[0])]!r} has {n_cand[b]} "
                             f"candidates with {int(n_gold[b])} held-out; expected one held-out (1.0) and >= 1 negative")
        # mean cosine to the context = dot product with the mean of the (unit) context vectors
        rows, cols, vals = p["ctx"]
        ctx_mean = sparse.csr_matrix((vals, (rows, cols)), shape=(n_blocks, len(text_list))) @ E
        cand = np.einsum("ij,ij->i", ctx_mean[inv], E[p["b"]])
        gold_score = np.bincount(inv, weights=np.where(gold, cand, 0.0), minlength=n_blocks)
        best_neg = np.full(n_blocks, -np.inf)
        np.maximum.at(best_neg, inv[~gold], cand[~gold])
        scores["mcnc_acc"] = float(np.mean(gold_score > best_neg))  # strict: a tie is wrong
        scores["mcnc_random"] = float(np.mean(1.0 / n_cand))

    setting = f"{template} (lower-cased)" if lower else template
    return metric_rows(scores, task="similarity", key=key.replace(setting=setting))


def benchmark_pairs(pairs: pa.Table) -> pa.Table:
    """The rows of an ``event_pairs`` table that belong to a benchmark of :data:`PAIR_TASKS`: co-occurrence
    counts (task ``cooccurrence``, the ``event_tuples`` reader) are training data, not scored."""
    import pyarrow.compute as pc

    return pairs.filter(pc.is_in(pairs["task"], pa.array(list(PAIR_TASKS))))


POOLING_REPRESENTATION = {"mean": "sentence", "cls": "cls"}  # pooling -> the `representation` column


def evaluate_encoder_pairs(
    encoder: Any,
    pairs: pa.Table,
    *,
    poolings: Sequence[str] = ("mean",),
    template: str = DEFAULT_TEMPLATE,
    lower: bool = True,
    key: RowKey,
    hard_metric: str | None = None,
) -> list[dict[str, Any]]:
    """:func:`evaluate_event_pairs` for every pooling of one encoder (anything with
    ``encode_sentences(texts, pooling=...)``, e.g. :class:`eventatlas.modeling.encode.Encoder` over an untuned
    or a trained model). ``key``'s ``representation`` is set per pooling: ``sentence`` for mean pooling (the
    name the mention representations use for it) and ``cls`` for the [CLS] vector. Used by ``untuned`` and by
    every trained method that evaluates its encoder on the event-similarity benchmarks."""
    rows: list[dict[str, Any]] = []
    for pooling in poolings:
        if pooling not in POOLING_REPRESENTATION:
            raise ValueError(f"pooling must be one of {tuple(POOLING_REPRESENTATION)}, got {pooling!r}")
        rows += evaluate_event_pairs(pairs, lambda texts, p=pooling: encoder.encode_sentences(texts, pooling=p),
                                     template=template, lower=lower,
                                     key=key.replace(representation=POOLING_REPRESENTATION[pooling]),
                                     hard_metric=hard_metric)
    return rows
