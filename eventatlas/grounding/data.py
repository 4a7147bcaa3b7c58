"""A grounding dataset (the wiki builder's or the FrameNet benchmark's tables) as model inputs.

Reads ``event_types`` (the candidate pool: name, definition, ``parent_id``) and ``mentions`` (label sets
= atomic event + ancestors, zero-shot ``split``), maps event ids to candidate indices, and subsamples
each split with a fixed seed (what was cut is recorded). Refuses, with one line, a dataset without
candidates or without label sets.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.manifest import read_table, table_path, table_rows
from ..data.selection import NotApplicable
from ..modeling.inputs import ENTITY_MARKERS

MARKERS = ENTITY_MARKERS  # the one definition, in modeling.inputs


@dataclass
class Mentions:
    ids: list[str]
    sentences: list[str]
    starts: list[int]
    ends: list[int]
    golds: list[list[int]]  # candidate indices: atomic event first, then its ancestors

    def __len__(self) -> int:
        return len(self.ids)

    def marked(self) -> tuple[list[str], list[int], list[int]]:
        """``left [ENT_START] mention [ENT_END] right`` and the span of the marked mention in it."""
        texts, a, b = [], [], []
        for s, i, j in zip(self.sentences, self.starts, self.ends):
            t = f"{s[:i]}{MARKERS[0]} {s[i:j]} {MARKERS[1]}{s[j:]}"
            texts.append(t)
            a.append(i)
            b.append(i + len(MARKERS[0]) + 2 + (j - i) + len(MARKERS[1]))
        return texts, a, b


@dataclass
class GroundingData:
    dataset: str
    type_ids: list[str]
    names: list[str]
    definitions: list[str]
    parent: np.ndarray  # candidate index of the parent, -1 at roots
    splits: dict[str, Mentions] = field(default_factory=dict)
    record: dict = field(default_factory=dict)
    # every split's gold events over ALL its mentions (before any cap, loaded splits or not): what
    # training must never touch outside the training split (e.g. when drawing pool negatives)
    split_events: dict[str, set[int]] = field(default_factory=dict)

    @property
    def index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.type_ids)}

    def candidate_texts(self) -> list[str]:
        """``title [ENT_TITLE] description`` per candidate."""
        return [f"{n} {MARKERS[2]} {d}".strip() for n, d in zip(self.names, self.definitions)]

    def events_of(self, split: str) -> set[int]:
        """Candidates that are a gold of some mention of ``split`` (atomic events and their ancestors)."""
        return {g for gs in self.splits[split].golds for g in gs} if split in self.splits else set()

    def outside_eval(self, train_split: str = "train") -> list[int]:
        """Candidates that are no gold of any mention of another split than ``train_split`` (the
        pool a zero-shot training may draw negatives from)."""
        banned = set().union(*(e for s, e in self.split_events.items() if s != train_split)) if self.split_events else set()
        return [i for i in range(len(self.type_ids)) if i not in banned]

    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for c, p in enumerate(self.parent.tolist()):
            if p >= 0:
                out.setdefault(p, []).append(c)
        return out


def load_candidates(dataset_dir: str | Path) -> GroundingData:
    """The candidate pool alone (what ``eventatlas ground`` needs); refuses a dataset without one."""
    d = Path(dataset_dir)
    if table_rows(d, "event_types") == 0:
        raise NotApplicable(f"{d}: dataset without candidates (no event_types rows): grounding needs an event pool")
    types = read_table(d, "event_types", columns=["type_id", "name", "definition", "parent_id"]).to_pylist()
    types.sort(key=lambda r: r["type_id"])
    idx = {r["type_id"]: i for i, r in enumerate(types)}
    parent = np.array([idx.get(r["parent_id"], -1) if r["parent_id"] else -1 for r in types], dtype=np.int64)
    return GroundingData(dataset=d.name, type_ids=[r["type_id"] for r in types], names=[r["name"] or r["type_id"] for r in types],
                         definitions=[r["definition"] or "" for r in types], parent=parent)


def load(dataset_dir: str | Path, *, max_mentions: dict[str, int | None] | None = None, seed: int = 0,
         splits: Sequence[str] = ("train", "dev", "test")) -> GroundingData:
    """Candidates plus each split's labelled mentions, each split capped at ``max_mentions[split]`` by a
    seeded sample (counts before and after in ``record``)."""
    d = Path(dataset_dir)
    gd = load_candidates(d)
    idx, parent, types = gd.index, gd.parent, gd.type_ids
    if not table_path(d, "mentions").exists():
        raise NotApplicable(f"{d}: no mentions table")
    rows = read_table(d, "mentions", columns=["mention_id", "sentence", "trigger_start", "trigger_end", "labels",
                                              "split"]).to_pylist()
    rows.sort(key=lambda r: r["mention_id"])
    rng = np.random.default_rng(seed)
    rec: dict = {"seed": seed, "candidates": len(types), "splits": {}}
    for r in rows:
        if r["split"] is not None:
            gd.split_events.setdefault(r["split"], set()).update(idx[l] for l in r["labels"] or () if l in idx)
    unknown = 0
    for split in splits:
        rs = [r for r in rows if r["split"] == split and r["labels"]]
        keep = []
        for r in rs:
            if all(l in idx for l in r["labels"]):
                keep.append(r)
            else:
                unknown += 1
        cap = (max_mentions or {}).get(split)
        n_all = len(keep)
        if cap is not None and n_all > cap:
            pick = np.sort(rng.choice(n_all, size=cap, replace=False))
            keep = [keep[i] for i in pick]
        rec["splits"][split] = {"mentions": n_all, "used": len(keep)}
        gd.splits[split] = Mentions([r["mention_id"] for r in keep], [r["sentence"] for r in keep],
                                    [r["trigger_start"] for r in keep], [r["trigger_end"] for r in keep],
                                    [[idx[l] for l in r["labels"]] for r in keep])
    rec["mentions_with_unknown_labels"] = unknown
    if not any(len(m) for m in gd.splits.values()):
        raise NotApplicable(f"{d}: no mention with a label set in splits {list(splits)}")
    if not any(len(g) > 1 for m in gd.splits.values() for g in m.golds) and not (parent >= 0).any():
        raise NotApplicable(f"{d}: no hierarchy (no parent_id, no label set of 2 or more): not a grounding dataset")
    gd.record = rec
    return gd


def setting(gd: GroundingData) -> str:
    s = gd.record["splits"]
    return " / ".join(f"{k} {v['used']}" + (f" of {v['mentions']}" if v["used"] != v["mentions"] else "") for k, v in s.items())
