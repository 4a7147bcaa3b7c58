"""Benchmark: frame_dml ranking recall - faiss top-k vs the obvious full-ranking baseline.

``eventatlas.evaluation.frames.ranking_recall`` asks faiss (``IndexFlatIP``) for only the k neighbours a
batch of queries needs (|relevant| + the excluded same-verb items); the baseline computes every query's
full cosine row and argsorts it (what one would write first). Both give the same recall (checked); the
ratio of wall times is printed and recorded as a benchmark run (``eventatlas.store.benchmarking``: run record,
published to the warehouse; ``eventatlas report`` shows it).

Data: N unit vectors in d = 384 around ``frames`` random frame centres (FrameNet-like skew: frame sizes
from a Zipf law), each instance assigned a verb so that verbs evoke 1-3 frames. Seeded.

Usage: python benchmarks/bench_frame_dml.py [--n 8000] [--frames 300] [--seed 0] [--smoke] [--no-publish]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.store import benchmarking  # noqa: E402


def data(n: int, n_frames: int, seed: int, d: int = 384):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_frames + 1) ** 1.1
    frames = rng.choice(n_frames, size=n, p=p / p.sum())
    centres = rng.standard_normal((n_frames, d))
    X = centres[frames] + 2.5 * rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    verbs_of_frame = {f: [f"v{f}_{k}" for k in range(rng.integers(1, 6))] for f in range(n_frames)}
    shared = rng.choice(n_frames, size=n_frames // 3)  # some verbs shared across frames (polysemy)
    verbs = []
    for i, f in enumerate(frames):
        pool = verbs_of_frame[f] + ([verbs_of_frame[shared[f]][0]] if f < len(shared) else [])
        verbs.append(pool[rng.integers(len(pool))])
    return X.astype(np.float32), frames.tolist(), verbs


def baseline(X, frames, verbs):
    f = np.asarray(frames)
    v = np.asarray(verbs)
    out = {}
    for space in ("all", "same", "diff"):
        scores = []
        for i in range(len(f)):
            s = X @ X[i]
            s[i] = -np.inf
            if space == "same":
                s[v != v[i]] = -np.inf
                rel = int(((f == f[i]) & (v == v[i])).sum()) - 1
            elif space == "diff":
                s[v == v[i]] = -np.inf
                rel = int(((f == f[i]) & (v != v[i])).sum())
            else:
                rel = int((f == f[i]).sum()) - 1
            if rel <= 0:
                continue
            top = np.argsort(-s, kind="stable")[:rel]
            scores.append((f[top] == f[i]).sum() / rel)
        out[f"recall_{space}"] = float(np.mean(scores))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = benchmarking.parse_args(ap, argv, smoke={"n": 400, "frames": 20})
    from eventatlas.evaluation.frames import ranking_recall

    bench = benchmarking.Benchmark("frame_dml", a, libraries=("faiss-cpu",))
    X, frames, verbs = data(a.n, a.frames, a.seed)
    t0 = time.perf_counter()
    fast = ranking_recall(X, frames, verbs)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = baseline(X, frames, verbs)
    t_slow = time.perf_counter() - t0
    diff = max(abs(fast[k] - slow[k]) for k in fast)
    if diff > 1e-9:
        raise SystemExit(f"faiss recall differs from the full ranking by {diff}: the timing compares different work")
    res = {"n": a.n, "frames": a.frames, "seed": a.seed, "faiss_s": round(t_fast, 3), "baseline_s": round(t_slow, 3),
           "speedup": round(t_slow / t_fast, 2), "max_abs_recall_diff": diff, "recall": fast}
    print(json.dumps(res, indent=1))
    bench.finish([benchmarking.case("s", t_fast, t_slow, higher_is_better=False, setting=f"n={a.n}",
                                    ours_label="faiss top-k", baseline_label="full argsort")], res)


if __name__ == "__main__":
    main()
