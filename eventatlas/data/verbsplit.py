"""Verb cross-validation for supervised frame induction (Yamada et al. 2023).

The *verbs* of a FrameNet dataset (the lemma of each ``.v`` lexical unit, ``cover.v`` -> ``cover``)
are split into ``n_sets`` disjoint sets: monosemous verbs (one frame in the data) and polysemous
verbs (several frames) are each shuffled with a fixed seed and dealt round-robin, so both groups
are spread equally over the sets. Fold ``i``: test = set ``i``, dev = set ``i+1``, train = the rest.
Frames overlap across sets; verbs never do.

* :func:`frame_mentions` selects the verb mentions (through :func:`.selection.select_labelled`, which
  records every drop) and adds ``verb`` / ``lu`` / ``frame`` per mention;
* :func:`split_verbs` deals the verbs, :func:`fold_roles` names a fold's sets, :func:`assign` maps
  mentions to sets, :func:`cap_per_lu` is the training-size cap (instances per LU, seeded);
* :func:`dataset_table` is the paper's data table (verbs, LUs, frames, instances per set).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .selection import NotApplicable, lu_of, select_labelled

ROLES = ("train", "dev", "test")


@dataclass
class FrameMentions:
    """Verb mentions with their verb, lexical unit (``lu.v@Frame``) and frame; ``selection`` = the drop record."""

    table: Any  # pyarrow table of the selected mentions
    verbs: np.ndarray
    lus: np.ndarray
    frames: np.ndarray
    selection: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.frames)

    def column(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    def verb_frames(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for v, f in zip(self.verbs, self.frames):
            out.setdefault(v, set()).add(f)
        return out


def frame_mentions(source: str | Path, *, lu_pos: str = "v", seed: int = 0) -> FrameMentions:
    """Every labelled mention whose LU has part of speech ``lu_pos``, with verb / LU / frame."""
    sel = select_labelled(source, k_seen=0, lu_pos=lu_pos, seed=seed)
    lus = [lu_of(e) for e in sel.column("extra")]
    missing = [i for i, lu in enumerate(lus) if lu is None]
    if missing:  # lu_pos selection already needs the LU, so this is a reader bug, not bad input
        raise ValueError(f"{source}: {len(missing)} selected mentions lack an LU name (first: "
                         f"{sel.mention_ids[missing[0]]})")
    frames = np.asarray(sel.labels, dtype=object)
    verbs = np.array([lu.rsplit(".", 1)[0] for lu in lus], dtype=object)
    lu_ids = np.array([f"{lu}@{f}" for lu, f in zip(lus, frames)], dtype=object)
    return FrameMentions(sel.table, verbs, lu_ids, frames, sel.record)


def split_verbs(verb_frames: Mapping[str, Sequence[str] | set[str]], *, n_sets: int = 3,
                seed: int = 0) -> list[list[str]]:
    """Verbs dealt into ``n_sets`` sets: monosemous and polysemous shuffled separately (seeded), round-robin."""
    if n_sets < 2:
        raise ValueError(f"n_sets must be >= 2, got {n_sets}")
    mono = sorted(v for v, fs in verb_frames.items() if len(set(fs)) == 1)
    poly = sorted(v for v, fs in verb_frames.items() if len(set(fs)) > 1)
    rng = np.random.default_rng(seed)
    sets: list[list[str]] = [[] for _ in range(n_sets)]
    for group in (mono, poly):
        order = rng.permutation(len(group))
        for k, j in enumerate(order):
            sets[k % n_sets].append(group[j])
    return sets


def fold_roles(fold: int, n_sets: int = 3) -> dict[str, list[int]]:
    """Set indices per role: test = ``fold``, dev = ``fold + 1`` (mod n), train = the rest."""
    if not 0 <= fold < n_sets:
        raise ValueError(f"fold must be in [0, {n_sets}), got {fold}")
    test, dev = fold, (fold + 1) % n_sets
    return {"train": [s for s in range(n_sets) if s not in (test, dev)], "dev": [dev], "test": [test]}


def assign(verbs: Sequence[str], sets: Sequence[Sequence[str]]) -> np.ndarray:
    """Set index of every mention's verb (-1: a verb in no set)."""
    where = {v: i for i, s in enumerate(sets) for v in s}
    return np.array([where.get(v, -1) for v in verbs], dtype=np.int64)


def role_index(set_of: np.ndarray, fold: int, n_sets: int = 3) -> dict[str, np.ndarray]:
    """Mention indices of each role of ``fold``."""
    roles = fold_roles(fold, n_sets)
    return {r: np.flatnonzero(np.isin(set_of, roles[r])) for r in ROLES}


def cap_per_lu(index: np.ndarray, lus: Sequence[str], cap: int | None, *, seed: int = 0) -> np.ndarray:
    """At most ``cap`` mentions of each LU among ``index`` (seeded choice; sorted); None = all."""
    index = np.asarray(index, dtype=np.int64)
    if cap is None:
        return index
    if cap < 1:
        raise ValueError(f"cap must be >= 1 or None, got {cap}")
    rng = np.random.default_rng([seed, 11])
    by_lu: dict[str, list[int]] = {}
    for i in index:
        by_lu.setdefault(lus[i], []).append(int(i))
    keep: list[int] = []
    for lu in sorted(by_lu):
        members = by_lu[lu]
        keep += members if len(members) <= cap else rng.choice(members, size=cap, replace=False).tolist()
    return np.sort(np.asarray(keep, dtype=np.int64))


def subsample(index: np.ndarray, cap: int | None, *, seed: int = 0, salt: int = 13) -> np.ndarray:
    """A seeded choice of at most ``cap`` of ``index`` (sorted); None = all."""
    index = np.asarray(index, dtype=np.int64)
    if cap is None or len(index) <= cap:
        return index
    return np.sort(np.random.default_rng([seed, salt]).choice(index, size=int(cap), replace=False))


def dataset_table(fm: FrameMentions, set_of: np.ndarray, *, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per set plus ``all``: verbs, monosemous/polysemous verbs, LUs, frames, instances."""
    n_sets = int(set_of.max()) + 1 if len(set_of) else 0
    names = list(names) if names else [f"set{i}" for i in range(n_sets)]
    rows = []
    for name, mask in [*((names[i], set_of == i) for i in range(n_sets)), ("all", set_of >= 0)]:
        vf: dict[str, set] = {}
        for v, f in zip(fm.verbs[mask], fm.frames[mask]):
            vf.setdefault(v, set()).add(f)
        rows.append({"set": name, "verbs": len(vf), "monosemous": sum(len(s) == 1 for s in vf.values()),
                     "polysemous": sum(len(s) > 1 for s in vf.values()), "lus": len(set(fm.lus[mask])),
                     "frames": len(set(fm.frames[mask])), "instances": int(mask.sum())})
    return rows


def check_fold(fm: FrameMentions, idx: Mapping[str, np.ndarray], *, min_frames: int = 2) -> None:
    """Refuse a fold whose dev or test set cannot be clustered (:class:`NotApplicable`)."""
    for role in ("dev", "test"):
        n = len(set(fm.frames[idx[role]])) if len(idx[role]) else 0
        if n < min_frames or len(idx[role]) < 3:
            raise NotApplicable(f"{role} set has {len(idx[role])} mentions of {n} frames (need >= 3 and "
                                f">= {min_frames}); too few verbs for the verb split")
    if not len(idx["train"]):
        raise NotApplicable("no training mentions in this fold")
