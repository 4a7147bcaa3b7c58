"""Scoring a discover run against the gold it never read: which detected mentions are gold (and of which
type), how the induced types are named, and how well "new" finds the types the known inventory lacks.

Every function takes plain lists and dicts (a card is a row of ``types.parquet``), so each is checked by hand.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Hashable, Iterable, Mapping, Sequence


def gold_of_spans(detected: Iterable[tuple[Hashable, int, int]],
                  gold: Mapping[tuple[Hashable, int, int], str]) -> list[str | None]:
    """The gold type of each detected ``(sentence key, start, end)``: strict span match (the TI rule), else None."""
    return [gold.get(tuple(d)) for d in detected]


def majority(labels: Iterable[str | None]) -> str | None:
    """The most frequent gold label of a type's matched mentions (ties: alphabetical), None when none matched."""
    c = Counter(x for x in labels if x is not None)
    return min(c, key=lambda t: (-c[t], t)) if c else None


def naming_hits(cards: Sequence[Mapping[str, Any]], top: Mapping[str, str | None],
                mapping: Mapping[str, Iterable[str]] | None = None) -> tuple[float | None, int]:
    """Hits@1 of each type's top link against its majority gold type: a hit when the top target is the
    majority type (``mapping`` None: same inventory) or one of its mapped targets. Types whose majority has no
    reachable target (unmapped, or absent from the linked inventory) are not asked; returns (share, asked)."""
    asked = hits = 0
    for c in cards:
        lab = c.get("majority_label")
        if lab is None:
            continue
        want = {lab} if mapping is None else set(mapping.get(lab) or ())
        if not want:
            continue
        asked += 1
        hits += top.get(c["type_id"]) in want
    return (hits / asked if asked else None), asked


def coverage(cards: Sequence[Mapping[str, Any]], gold_types: Iterable[str]) -> float | None:
    """The share of ``gold_types`` that are the majority of at least one induced type."""
    want = set(gold_types)
    got = {c.get("majority_label") for c in cards} & want
    return len(got) / len(want) if want else None


def novelty(cards: Sequence[Mapping[str, Any]], new: Mapping[str, bool], positives: Iterable[str],
            ignore: Iterable[str] = ()) -> dict[str, float | None]:
    """Precision and recall of the "new" verdicts. A type marked new is right when its majority gold type is
    one of ``positives`` (types the linked inventories lack); a type of mentions that match no gold (spurious
    detections) marked new is wrong. Types whose majority is in ``ignore`` (hidden but mapped elsewhere: they
    should be linked, scored by :func:`naming_hits`) do not count either way. Recall: the share of the
    ``positives`` present as some type's majority that at least one such type marked new finds."""
    pos, skip = set(positives), set(ignore)
    marked = [c for c in cards if new.get(c["type_id"]) and c.get("majority_label") not in skip]
    right = [c for c in marked if c.get("majority_label") in pos]
    present = {c.get("majority_label") for c in cards} & pos
    found = {c["majority_label"] for c in right}
    p = len(right) / len(marked) if marked else None
    r = len(found) / len(present) if present else None
    f = (2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else
         (0.0 if p is not None and r is not None else None))
    return {"new_precision": p, "new_recall": r, "new_f1": f, "n_new": float(len(marked)),
            "n_hidden_present": float(len(present))}


def choose_threshold(cards: Sequence[Mapping[str, Any]], best: Mapping[str, float], positives: Iterable[str],
                     ignore: Iterable[str], grid: Sequence[float]) -> tuple[float, dict[str, float | None],
                                                                              list[dict[str, Any]]]:
    """The grid threshold whose "new below it" verdicts have the best new F1 on these (dev) cards (ties: the
    lower threshold, which marks fewer types new), its scores and the whole curve."""
    curve = []
    for th in grid:
        got = novelty(cards, {t: s < th for t, s in best.items()}, positives, ignore)
        curve.append({"below": float(th), **got})
    key = [(c["new_f1"] if c["new_f1"] is not None else -1.0) for c in curve]
    i = max(range(len(curve)), key=lambda j: (key[j], -j))
    return curve[i]["below"], curve[i], curve
