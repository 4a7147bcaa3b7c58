"""Normalised-name match: the baseline that reads names and nothing else.

A type's keys are its id and its name, each reduced to the last ``.``-separated part (``Conflict.Attack``
-> ``attack``), lower-cased, spaces and ``-`` -> ``_``. ``score = 1`` when a key of ``i`` equals a key of
``j``; otherwise ``0.9 *`` the best :class:`difflib.SequenceMatcher` ratio between the keys, so a near
name ranks above an unrelated one but never above an exact match.
"""
from __future__ import annotations

import difflib
import re

import numpy as np

from .base import Scores, TypeSet

NEAR_WEIGHT = 0.9


def keys(type_id: str, name: str | None) -> set[str]:
    out = set()
    for s in (type_id, name):
        if s:
            out.add(re.sub(r"[\s\-]+", "_", str(s).rsplit(".", 1)[-1].strip()).lower())
    return out


def score(A: TypeSet, B: TypeSet) -> Scores:
    ka = [keys(t, n) for t, n in zip(A.types, A.names)]
    kb = [keys(t, n) for t, n in zip(B.types, B.names)]
    exact: dict[str, list[int]] = {}
    for j, ks in enumerate(kb):
        for key in ks:
            exact.setdefault(key, []).append(j)
    out = np.zeros((len(ka), len(kb)))
    for i, ks in enumerate(ka):
        sm = difflib.SequenceMatcher(autojunk=False)
        for a in ks:
            sm.set_seq2(a)
            for j, kbj in enumerate(kb):
                best = 0.0
                for b in kbj:
                    sm.set_seq1(b)
                    best = max(best, sm.ratio())
                out[i, j] = max(out[i, j], NEAR_WEIGHT * best)
        for a in ks:
            for j in exact.get(a, ()):
                out[i, j] = 1.0
    return Scores(out)
