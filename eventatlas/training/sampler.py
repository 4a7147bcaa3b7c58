"""Length-bucketed, seeded batches with an exact, resumable order.

Each epoch's batches are a pure function of (seed, epoch): a seeded permutation, cut into chunks
of ``chunk_batches`` batches that are sorted by length (so a batch holds similar lengths and
dynamic padding wastes little), cut into batches, and the batch order shuffled again so lengths
do not drift through the epoch. Every example appears exactly once per epoch (the last batch may
be short, or dropped with ``drop_last``). Resuming needs only (epoch, position in the epoch).

Data parallel: ``shard(batches, rank, world)`` gives each process every ``world``-th batch, cut
to the same count on every process so they step in lockstep.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


class BucketBatchSampler:
    def __init__(self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, bucket: bool = True,
                 chunk_batches: int = 50, shuffle: bool = True, drop_last: bool = False):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size = int(batch_size)
        self.seed, self.bucket, self.chunk_batches = int(seed), bool(bucket), int(chunk_batches)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batches(self, epoch: int) -> list[np.ndarray]:
        n = len(self.lengths)
        rng = np.random.default_rng([self.seed, int(epoch)])
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        if self.bucket:
            chunk = self.batch_size * self.chunk_batches
            order = np.concatenate([c[np.argsort(self.lengths[c], kind="stable")]
                                    for c in (order[i:i + chunk] for i in range(0, n, chunk))]) if n else order
        out = [order[i:i + self.batch_size] for i in range(0, n, self.batch_size)]
        if self.drop_last and out and len(out[-1]) < self.batch_size:
            out.pop()
        if self.bucket and self.shuffle:
            out = [out[i] for i in rng.permutation(len(out))]
        return out

    def padding_fraction(self, epoch: int = 0) -> float:
        """Share of padded positions in this epoch's batches (dynamic padding to each batch's longest)."""
        return padding_fraction(self.lengths, self.batches(epoch))


def padding_fraction(lengths: np.ndarray, batches: Sequence[np.ndarray]) -> float:
    padded = sum(len(b) * int(lengths[b].max()) for b in batches if len(b))
    real = sum(int(lengths[b].sum()) for b in batches)
    return 1.0 - real / padded if padded else 0.0


def shard(batches: Sequence[np.ndarray], rank: int, world: int) -> list[np.ndarray]:
    if world <= 1:
        return list(batches)
    per = len(batches) // world
    return list(batches[rank::world][:per])
