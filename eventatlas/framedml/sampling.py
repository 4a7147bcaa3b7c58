"""Per-anchor partners of the pair losses, drawn afresh for every batch (so every epoch):
a positive = a uniformly random *other* instance of the anchor's frame, a negative = a uniformly
random instance of any other frame. Vectorised over a batch; an anchor whose frame has no other
training instance has no positive (``-1``)."""
from __future__ import annotations

import numpy as np


class PartnerSampler:
    def __init__(self, labels: np.ndarray):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.n = len(self.labels)
        self.order = np.argsort(self.labels, kind="stable")  # instances grouped by frame
        counts = np.bincount(self.labels)
        self.start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.count = counts
        self.pos_in_frame = np.empty(self.n, dtype=np.int64)
        self.pos_in_frame[self.order] = np.arange(self.n) - self.start[self.labels[self.order]]
        if len(counts) < 2:
            raise ValueError("pair losses need at least two training frames")

    def positives(self, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        a = np.asarray(anchors, dtype=np.int64)
        f = self.labels[a]
        n_other = self.count[f] - 1
        k = np.floor(rng.random(len(a)) * np.maximum(n_other, 1)).astype(np.int64)
        k = k + (k >= self.pos_in_frame[a])  # skip the anchor itself
        out = self.order[np.minimum(self.start[f] + k, self.n - 1)]
        return np.where(n_other > 0, out, -1)

    def negatives(self, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        a = np.asarray(anchors, dtype=np.int64)
        f = self.labels[a]
        k = np.floor(rng.random(len(a)) * (self.n - self.count[f])).astype(np.int64)
        k = np.where(k >= self.start[f], k + self.count[f], k)  # skip the anchor's frame block
        return self.order[k]
