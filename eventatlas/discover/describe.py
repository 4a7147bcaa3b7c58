"""Type cards from a clustering of mention embeddings.

A card: the cluster's size, its most frequent trigger forms (lower-cased; ties broken alphabetically), its
medoids (the mentions nearest the cluster's mean direction by cosine, shown with the trigger in
[brackets]), its cohesion (the mean cosine of its mentions to that direction) and a short name (its top
trigger forms joined by " / "). Cards come largest first, numbered ``t1``, ``t2``, ...
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np


def marked(sentence: str, start: int, end: int) -> str:
    """The sentence with its trigger in [brackets] (the form `search --query` takes)."""
    return f"{sentence[:start]}[{sentence[start:end]}]{sentence[end:]}"


def _unit(X: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


def describe_types(mentions: Sequence[dict[str, Any]], X: np.ndarray, clusters: Sequence[int], *,
                   n_triggers: int = 5, n_examples: int = 3, name_triggers: int = 2) -> list[dict[str, Any]]:
    """One card per cluster of ``clusters`` (aligned with ``mentions``: dicts with ``mention_id``, ``trigger``,
    ``sentence``, ``trigger_start``, ``trigger_end`` and optionally ``labels``, and with the rows of ``X``)."""
    if not (len(mentions) == len(X) == len(clusters)):
        raise ValueError(f"{len(mentions)} mentions, {len(X)} embeddings and {len(clusters)} cluster ids: "
                         "they must be aligned")
    U = _unit(np.asarray(X, dtype=np.float64))
    cl = np.asarray(clusters)
    cards = []
    for c in sorted(set(cl.tolist()), key=lambda c: (-int((cl == c).sum()), c)):
        idx = np.flatnonzero(cl == c)
        centre = U[idx].mean(axis=0)
        centre = centre / (np.linalg.norm(centre) or 1.0)
        sims = U[idx] @ centre
        order = idx[np.lexsort((idx, -sims))]  # most central first; ties by position
        forms = Counter(str(mentions[i]["trigger"]).lower() for i in idx)
        top = sorted(forms.items(), key=lambda kv: (-kv[1], kv[0]))[:n_triggers]
        gold = Counter(lab[0] for i in idx if (lab := mentions[i].get("labels")))
        cards.append({
            "cluster": int(c), "size": int(len(idx)), "name": " / ".join(f for f, _ in top[:name_triggers]),
            "triggers": [f for f, _ in top], "trigger_counts": [n for _, n in top],
            "cohesion": round(float(sims.mean()), 4),
            "medoid_ids": [str(mentions[i]["mention_id"]) for i in order[:n_examples]],
            "examples": [marked(mentions[i]["sentence"], mentions[i]["trigger_start"], mentions[i]["trigger_end"])
                         for i in order[:n_examples]],
            "majority_label": gold.most_common(1)[0][0] if gold else None,
            "mention_ids": [str(mentions[i]["mention_id"]) for i in idx],
        })
    for rank, card in enumerate(cards, 1):
        card["type_id"] = f"t{rank}"
    return cards


def map_2d(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D coordinates of the mentions for a map: the first two principal components of the unit vectors
    (linear and seeded, so the map is the same on every run and costs one pass at any corpus size)."""
    from sklearn.decomposition import PCA

    U = _unit(np.asarray(X, dtype=np.float32))
    if len(U) < 3:
        return np.zeros((len(U), 2), dtype=np.float32)
    return PCA(n_components=2, svd_solver="randomized", random_state=seed).fit_transform(U).astype(np.float32)
