"""Labelled-mention selection with the seen/unseen protocol, used by every type-induction method.

``select_labelled(dataset_dir, ...)`` keeps the mentions a run uses and records what each filter
dropped and why (``LabelledMentions.record``, stored in the run's params):

1. ``splits``: mentions of other splits are dropped;
2. unlabelled mentions are dropped (primary label = first of ``labels``);
3. ``lu_pos``: FrameNet mentions whose lexical unit has another part of speech (``.v`` = verbs);
4. ``max_train``: a seeded subsample of what is left (the training pool, when a method trains);
5. seen / unseen: the ``k_seen`` most frequent primary labels are *seen* (ties by type id), or the
   given ``seen_types``; ``k_seen`` is clamped so that at least ``min_unseen_types`` types stay
   unseen (recorded as requested vs used). Or ``n_unseen`` (the paper's MAVEN 150/18 protocol):
   the unseen types are a fixed seeded choice (``unseen_seed``, independent of the run seed) of
   ``n_unseen`` types among those with at least ``unseen_min_mentions`` mentions, and the seen types
   are the rest (the ``k_seen`` most frequent of the rest when ``k_seen`` is smaller); the choice is
   recorded under ``record["unseen_choice"]``;
6. ``heldout_sentences``: a sentence-disjoint hold-out. A seeded fraction of the distinct sentence texts
   (``heldout_seed``; a sentence is held out iff a hash of (seed, text) falls below the fraction, so the
   draw never depends on row order or on the other sentences) is set aside *after* the type split, which
   stays the dataset's. ``part="train"`` keeps the other sentences' mentions (what a training run sees),
   ``part="heldout"`` only the held-out ones (what the saved model is evaluated on). The draw is recorded
   under ``record["heldout"]`` with a digest of the held-out sentences;
7. ``max_eval``: a seeded subsample of the unseen mentions, which are the ones clustered and scored.

Too little left to evaluate raises :class:`NotApplicable` (the run is recorded as skipped with the
reason instead of failing).
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)
COLUMNS = ("mention_id", "doc_id", "sentence", "trigger_start", "trigger_end", "trigger", "split", "labels", "extra")


class NotApplicable(ValueError):
    """A method cannot run on this dataset (e.g. fewer than two unseen types to cluster).

    ``train-all`` records such a run as ``skipped`` with the reason instead of failing."""


@dataclass
class LabelledMentions:
    """Selected labelled mentions (rows of ``table``) with their primary label and the protocol split."""

    table: pa.Table
    labels: np.ndarray  # primary label per row (object array of str)
    seen_types: list[str]
    unseen_types: list[str]
    eval_index: np.ndarray  # rows that are clustered and scored (unseen, after max_eval)
    record: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        idx = {t: i for i, t in enumerate(self.seen_types)}
        self.seen_index = np.array([idx.get(t, -1) for t in self.labels], dtype=np.int64)

    def __len__(self) -> int:
        return self.table.num_rows

    def column(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    @property
    def mention_ids(self) -> list[str]:
        return self.column("mention_id")

    @property
    def sentences(self) -> list[str]:
        return self.column("sentence")

    @property
    def starts(self) -> list[int]:
        return [int(x) for x in self.column("trigger_start")]

    @property
    def ends(self) -> list[int]:
        return [int(x) for x in self.column("trigger_end")]

    @property
    def unseen_mask(self) -> np.ndarray:
        return self.seen_index < 0

    def eval_table(self) -> pa.Table:
        return self.table.take(pa.array(self.eval_index, pa.int64()))

    @property
    def eval_labels(self) -> np.ndarray:
        return self.labels[self.eval_index]

    def setting(self) -> str:
        """Short protocol name for metric rows, e.g. ``10 seen / 40 unseen`` (``, verbs`` for lu_pos v)."""
        r = self.record
        s = f"{r['k_seen']} seen / {r['n_unseen_types']} unseen"
        if r.get("lu_pos"):
            s += ", verbs" if r["lu_pos"] == "v" else f", lu_pos={r['lu_pos']}"
        if r.get("splits"):
            s += f", {'+'.join(r['splits'])}"
        return s


def lu_of(extra: str | None) -> str | None:
    """A FrameNet mention's lexical-unit name from its ``extra`` JSON (``cover.v``), or None."""
    if not extra:
        return None
    try:
        lu = json.loads(extra).get("lu")
    except (ValueError, AttributeError):
        return None
    return lu if isinstance(lu, str) and "." in lu else None


def lu_pos_of(extra: str | None) -> str | None:
    """Part of speech of a FrameNet mention's lexical unit (``cover.v`` -> ``v``)."""
    lu = lu_of(extra)
    return lu.rsplit(".", 1)[1] if lu else None


def rank_types(labels: Sequence[str]) -> list[str]:
    """Types by frequency, most frequent first; ties by type id (deterministic)."""
    counts = Counter(labels)
    return sorted(counts, key=lambda t: (-counts[t], t))


def choose_unseen_types(labels: Sequence[str], n: int, *, min_mentions: int = 1, seed: int = 0,
                        where: str = "mentions") -> tuple[list[str], dict[str, Any]]:
    """A fixed seeded choice of ``n`` unseen types among those with >= ``min_mentions`` mentions.

    The candidates are sorted by type id before the draw, so the choice depends only on the label
    counts, ``n``, ``min_mentions`` and ``seed`` (never on row order or the run seed). Returns the
    chosen types (most frequent first, ties by id) and the record of the choice."""
    counts = Counter(labels)
    cands = sorted(t for t, c in counts.items() if c >= min_mentions)
    if len(cands) < n:
        raise NotApplicable(f"{where}: only {len(cands)} types have >= {min_mentions} mentions; "
                            f"cannot choose {n} unseen types")
    rng = np.random.default_rng(seed)
    pick = [cands[i] for i in sorted(rng.choice(len(cands), size=int(n), replace=False))]
    pick.sort(key=lambda t: (-counts[t], t))
    return pick, {"n_unseen": int(n), "min_mentions": int(min_mentions), "seed": int(seed),
                  "n_candidates": len(cands), "types": pick, "mentions": {t: int(counts[t]) for t in pick}}


def heldout_sentence_mask(sentences: Sequence[str], fraction: float, seed: int = 0) -> np.ndarray:
    """True for the mentions whose sentence is held out: a sentence is held out iff the first 8 bytes of
    sha256(f"{seed}:{text}"), read as a fraction of 2**64, fall below ``fraction``. Equal texts always fall on
    the same side (the hold-out is sentence-disjoint even where a text recurs under another id)."""
    if not 0 < fraction < 1:
        raise ValueError(f"heldout_sentences must be in (0, 1), got {fraction}")
    cut = int(fraction * 2**64)
    side: dict[str, bool] = {}
    for t in sentences:
        if t not in side:
            side[t] = int.from_bytes(hashlib.sha256(f"{seed}:{t}".encode()).digest()[:8], "big") < cut
    return np.fromiter((side[t] for t in sentences), dtype=bool, count=len(sentences))


def _subsample(n: int, cap: int | None, seed: int, salt: int) -> np.ndarray | None:
    """Sorted seeded choice of ``cap`` of ``n`` rows, or None when nothing needs dropping."""
    if not cap or n <= cap:
        return None
    rng = np.random.default_rng(seed if salt == 0 else [seed, salt])
    return np.sort(rng.choice(n, size=int(cap), replace=False))


def select_labelled(
    source: str | Path | pa.Table,
    *,
    k_seen: int = 10,
    seen_types: Sequence[str] | None = None,
    splits: Sequence[str] | None = None,
    lu_pos: str | None = None,
    max_train: int | None = None,
    max_eval: int | None = None,
    min_unseen_types: int = 2,
    min_eval_mentions: int = 2,
    seed: int = 0,
    n_unseen: int | None = None,
    unseen_min_mentions: int = 1,
    unseen_seed: int = 0,
    heldout_sentences: float | None = None,
    heldout_seed: int = 0,
    part: str = "train",
) -> LabelledMentions:
    """See the module docstring. ``source`` is a dataset dir, a mentions Parquet or a table."""
    if isinstance(source, pa.Table):
        table, where = source, "mentions table"
    else:
        p = Path(source)
        p = p / "mentions.parquet" if p.is_dir() else p
        if not p.exists():
            raise FileNotFoundError(f"{p}: no mentions table (dataset not ingested?)")
        names = pq.ParquetFile(p).schema_arrow.names
        table, where = pq.read_table(p, columns=[c for c in COLUMNS if c in names]), str(p)
    drops: dict[str, dict[str, Any]] = {}

    def drop(name: str, n: int, reason: str) -> None:
        if n:
            drops[name] = {"n": int(n), "reason": reason}

    n_total = table.num_rows
    if splits:
        keep = pc.is_in(table["split"], value_set=pa.array(list(splits), pa.string()))
        before = table.num_rows
        table = table.filter(pc.fill_null(keep, False))
        drop("split", before - table.num_rows, f"split not in {list(splits)}")
    labels_all = table["labels"].to_pylist()
    keep_rows = [bool(lab) for lab in labels_all]
    drop("unlabelled", keep_rows.count(False), "no gold label")
    if lu_pos is not None:
        if "extra" not in table.column_names:
            raise ValueError(f"{where}: lu_pos filter needs the mentions' 'extra' column (FrameNet LU)")
        pos = [lu_pos_of(e) for e in table["extra"].to_pylist()]
        n_before = sum(keep_rows)
        keep_rows = [k and p_ == lu_pos for k, p_ in zip(keep_rows, pos)]
        drop("lu_pos", n_before - sum(keep_rows), f"lexical unit part of speech is not {lu_pos!r}")
    idx = np.flatnonzero(keep_rows)
    choice: dict[str, Any] | None = None
    unseen_pick: list[str] = []
    if seen_types is None and n_unseen:
        # the type split is the dataset's: drawn before the max_train subsample, from every labelled row
        unseen_pick, choice = choose_unseen_types([labels_all[i][0] for i in idx], n_unseen,
                                                  min_mentions=unseen_min_mentions, seed=unseen_seed, where=where)
    pick = _subsample(len(idx), max_train, seed, salt=1)
    if pick is not None:
        drop("train_subsample", len(idx) - len(pick), f"seeded subsample to max_train={max_train}")
        idx = idx[pick]
    table = table.take(pa.array(idx, pa.int64()))
    labels = np.array([labels_all[i][0] for i in idx], dtype=object)
    ranked = rank_types(labels.tolist())
    if seen_types is not None:
        unknown = sorted(set(seen_types) - set(ranked))
        if unknown:
            raise ValueError(f"{where}: seen_types not among the selected mentions' types: {unknown[:10]}")
        seen = [t for t in ranked if t in set(seen_types)]
        k_requested = len(seen)
    elif choice is not None:
        rest = [t for t in ranked if t not in set(unseen_pick)]
        k_requested = int(k_seen) if k_seen else len(rest)
        seen = rest[:k_requested]
    else:
        k_requested = int(k_seen)
        # Tiny datasets (the shipped samples) may have <= k_seen types: keep min_unseen_types unseen
        # so there is something to cluster; recorded as k_seen vs k_seen_requested.
        seen = ranked[: max(0, min(k_requested, len(ranked) - min_unseen_types))]
        if len(seen) < k_requested:  # said, not only recorded: the run is not the one asked for
            log.warning("%s: k_seen %d lowered to %d: %d types, and %d must stay unseen to cluster "
                        "(recorded as k_seen_requested / k_seen)", where, k_requested, len(seen), len(ranked),
                        min_unseen_types)
    seen_set = set(seen)
    unseen = [t for t in ranked if t not in seen_set]
    if choice is not None:
        # types neither seen nor chosen unseen (k_seen below the rest) are left out, not clustered
        unseen = [t for t in ranked if t in set(unseen_pick)]
        left_out = ~np.isin(labels, np.array(seen + unseen, dtype=object))
        if left_out.any():
            drop("unchosen_type", int(left_out.sum()), "type neither among the k_seen seen nor the chosen unseen")
            keep = np.flatnonzero(~left_out)
            table, labels = table.take(pa.array(keep, pa.int64())), labels[keep]
    heldout = None
    if heldout_sentences:
        if part not in ("train", "heldout"):
            raise ValueError(f"{where}: part must be 'train' or 'heldout', got {part!r}")
        texts = table["sentence"].to_pylist()
        mask = heldout_sentence_mask(texts, heldout_sentences, heldout_seed)
        held = sorted({t for t, m in zip(texts, mask) if m})
        keep = np.flatnonzero(mask if part == "heldout" else ~mask)
        drop("heldout_part", len(labels) - len(keep),
             f"sentence {'not ' if part == 'heldout' else ''}held out (heldout_sentences={heldout_sentences}, "
             f"heldout_seed={heldout_seed}, part={part})")
        heldout = {"fraction": float(heldout_sentences), "seed": int(heldout_seed), "part": part,
                   "n_sentences": len(set(texts)), "n_heldout_sentences": len(held),
                   "n_mentions_in_part": int(len(keep)),
                   "heldout_sha256": hashlib.sha256("\n".join(held).encode()).hexdigest()}
        table, labels = table.take(pa.array(keep, pa.int64())), labels[keep]
    elif part != "train":
        raise ValueError(f"{where}: part={part!r} needs heldout_sentences (the fraction of sentences held out)")
    eval_index = np.flatnonzero([t not in seen_set for t in labels])
    drop("seen_type", len(labels) - len(eval_index), "mention of a seen type: trained on, not scored")
    n_unseen = len(eval_index)
    pick = _subsample(n_unseen, max_eval, seed, salt=0)
    if pick is not None:
        drop("eval_subsample", n_unseen - len(pick), f"seeded subsample to max_eval={max_eval}")
        eval_index = eval_index[pick]
    n_types_eval = len(set(labels[eval_index].tolist()))
    record = {
        "n_mentions_total": n_total,
        "n_labelled_selected": int(len(idx)),
        "n_types": len(ranked),
        "k_seen_requested": k_requested,
        "k_seen": len(seen),
        "seen_types": list(seen),
        "n_seen_types": len(seen),
        "n_unseen_types": len(unseen),
        "n_unseen_mentions": int(n_unseen),
        "n_mentions_clustered": int(len(eval_index)),
        "n_types_clustered": n_types_eval,
        "subsampled": "eval_subsample" in drops,
        "splits": list(splits) if splits else None,
        "lu_pos": lu_pos,
        "max_train": max_train,
        "max_eval": max_eval,
        "drops": drops,
    }
    if choice is not None:
        record["unseen_choice"] = choice
    if heldout is not None:
        record["heldout"] = heldout
    if len(eval_index) < min_eval_mentions or n_types_eval < min_unseen_types:
        raise NotApplicable(
            f"{where}: only {len(eval_index)} unseen mentions / {n_types_eval} unseen types after selection "
            f"(k_seen={len(seen)}, splits={list(splits) if splits else None}, lu_pos={lu_pos}); nothing to cluster")
    return LabelledMentions(table, labels, list(seen), unseen, eval_index, record)


class SelectionConfig(BaseModel):
    """The mention selection of the induction methods (``untuned``, ``batch_attention``): one set of fields with
    one meaning (the module docstring), mixed into each method's config and handed to :func:`select_labelled` by
    :meth:`select`, so the two cannot drift apart."""

    k_seen: Optional[int] = Field(None, ge=0, description="most frequent types held out as seen (default: the "
                                  "method's; 0: none, e.g. frames as clusters)")
    seen_types: Optional[list[str]] = None
    # MAVEN 150/18-style protocols: a fixed seeded choice of n_unseen types
    n_unseen: Optional[int] = Field(None, ge=2)
    unseen_min_mentions: int = Field(1, ge=1)
    unseen_seed: int = 0
    # a sentence-disjoint hold-out: part "train" never sees the held-out sentences, part "heldout" is only them
    heldout_sentences: Optional[float] = Field(None, gt=0, lt=1)
    heldout_seed: int = 0
    part: Literal["train", "heldout"] = "train"
    lu_pos: Optional[str] = None
    max_mentions: Optional[int] = Field(20_000, ge=2, description="cap on the unseen mentions scored (a seeded "
                                        "subsample above it)")

    def select(self, source: str | Path | pa.Table, *, seed: int, k_seen_default: int | None,
               **extra: Any) -> LabelledMentions:
        """:func:`select_labelled` with these fields; ``k_seen_default`` stands for an unset ``k_seen`` (the
        method's default); ``extra``: the method's own arguments (``splits``, ``max_train``)."""
        return select_labelled(source, k_seen=k_seen_default if self.k_seen is None else self.k_seen,
                               seen_types=self.seen_types, lu_pos=self.lu_pos, max_eval=self.max_mentions, seed=seed,
                               n_unseen=self.n_unseen, unseen_min_mentions=self.unseen_min_mentions,
                               unseen_seed=self.unseen_seed, heldout_sentences=self.heldout_sentences,
                               heldout_seed=self.heldout_seed, part=self.part, **extra)
