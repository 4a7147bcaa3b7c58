"""Word scores to trigger spans.

A word is inside a trigger when its trigger probability ``1 - P(O)`` reaches the threshold. A run of such
words is one trigger, cut where a word's ``P(B)`` exceeds its ``P(I)`` (a new trigger starts); the span's
characters run from its first word's start to its last word's end. Its type is the argmax of its words'
mean type probabilities; it keeps both scores: ``score`` (mean trigger probability of its words) and
``type_score`` (that type's mean probability).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .words import B, I, O


def spans(ident: np.ndarray, typ: np.ndarray, word_spans: Sequence[tuple[int, int]], threshold: float,
          types: Sequence[str]) -> list[tuple[int, int, str, float, float]]:
    """``(start, end, type, score, type_score)`` of every predicted trigger of one sentence."""
    inside = (1.0 - ident[:, O]) >= threshold
    out = []
    k, n = 0, len(word_spans)
    while k < n:
        if not inside[k]:
            k += 1
            continue
        j = k + 1
        while j < n and inside[j] and ident[j, I] >= ident[j, B]:
            j += 1
        p = typ[k:j].mean(0)
        t = int(np.argmax(p))
        out.append((word_spans[k][0], word_spans[j - 1][1], types[t], float((1.0 - ident[k:j, O]).mean()), float(p[t])))
        k = j
    return out
