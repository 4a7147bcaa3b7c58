"""Zero-shot splits: connected components over P361/P527/P155/P156, seeded 80/10/10 by component."""
from __future__ import annotations

import random
from typing import Iterable

from .wikidata import EventRecord

SPLITS = ("train", "dev", "test")


def components(events: Iterable[EventRecord]) -> list[list[str]]:
    """Connected components (sorted lists, sorted by first member) over the relation claims."""
    evs = {e.qid: e for e in events}
    par = {q: q for q in evs}

    def find(x):
        while par[x] != x:
            par[x] = par[par[x]]
            x = par[x]
        return x

    for e in evs.values():
        for o in e.part_of + e.has_part + e.follows + e.followed_by:
            if o in evs:
                a, b = find(e.qid), find(o)
                if a != b:
                    par[max(a, b, key=lambda q: (len(q), q))] = min(a, b, key=lambda q: (len(q), q))
    groups: dict[str, list[str]] = {}
    for q in evs:
        groups.setdefault(find(q), []).append(q)
    comps = [sorted(g, key=lambda q: (len(q), q)) for g in groups.values()]
    return sorted(comps, key=lambda g: (len(g[0]), g[0]))


def assign_splits(comps: list[list[str]], seed: int, ratios=(0.8, 0.1, 0.1)) -> dict[str, str]:
    """qid -> split. Components are shuffled with ``seed`` and cut 80/10/10 by count (at least one
    component in dev and test when there are three or more)."""
    order = list(range(len(comps)))
    random.Random(seed).shuffle(order)
    n = len(order)
    n_dev = max(1, round(ratios[1] * n)) if n >= 3 else 0
    n_test = max(1, round(ratios[2] * n)) if n >= 3 else 0
    n_train = n - n_dev - n_test
    out = {}
    for rank, ci in enumerate(order):
        split = "train" if rank < n_train else ("dev" if rank < n_train + n_dev else "test")
        for q in comps[ci]:
            out[q] = split
    return out
