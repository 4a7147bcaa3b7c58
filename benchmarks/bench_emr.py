"""Benchmark: few-shot event mention retrieval over a 100k-mention corpus.

Compares, in one run and on the same queries and corpus:
  loop   the obvious baseline: a per-query Python loop, each query scoring the whole corpus with
         sklearn ``cosine_similarity(shots, corpus)``, the mean over its shots, and an argsort;
  faiss  eventatlas.evaluation.retrieval.rank (what ``eventatlas search`` and the EMR evaluation
         use): the mean unit shot vector per query, every query in one batched faiss
         ``IndexFlatIP`` top-k search (index build timed separately and included in the ratio).
Both return the top ``--top`` corpus items per query; their agreement is checked (overlap of the
top lists; ties aside they are the same ranking) and recorded.

Data ("synthetic but realistic"): N points drawn around real ``window4`` vectors (all-MiniLM-L6-v2,
last 4 layers over ±2 words, d = 1536) of the MAVEN subset's mention pool from the embedding cache
(``--pool``: an embeddings .npy; without one, 2,000 Gaussian-mixture bases): x = normalise(b_i +
0.25 (b_j - b_i) [20% of points] + s g), g ~ N(0, I/d), s ~ U(0.35, 0.75). Queries: k shots drawn
from the points around one base. Seeded (seed recorded).

Usage:  python benchmarks/bench_emr.py [--n 100000] [--queries 50] [--k 5] [--top 50] [--pool PATH.npy] [--smoke]
Recorded as a benchmark run (``eventatlas.store.benchmarking``: run record, published to the warehouse).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from eventatlas.store import benchmarking  # noqa: E402

SEED = 20261123


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def corpus(n: int, pool: str | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    if pool:
        bases = _unit(np.load(pool).astype(np.float32))
        source = f"window4 vectors of {Path(pool).name} ({len(bases)} bases)"
    else:
        centres = rng.normal(size=(40, 1536)).astype(np.float32)
        bases = _unit(centres[rng.integers(40, size=2000)] + rng.normal(scale=0.8, size=(2000, 1536)).astype(np.float32))
        source = "Gaussian mixture (2000 bases, d=1536): no --pool given"
    d = bases.shape[1]
    owner = rng.integers(len(bases), size=n)
    X = bases[owner].copy()
    mix = rng.random(n) < 0.2
    other = rng.integers(len(bases), size=int(mix.sum()))
    X[mix] += 0.25 * (bases[other] - X[mix])
    X += rng.uniform(0.35, 0.75, size=(n, 1))[:, :].astype(np.float32) * rng.normal(size=(n, d)).astype(np.float32) / np.sqrt(d)
    return _unit(X).astype(np.float32), owner, source


def loop_baseline(queries: list[np.ndarray], X: np.ndarray, top: int) -> tuple[list[np.ndarray], float]:
    from sklearn.metrics.pairwise import cosine_similarity

    t = time.perf_counter()
    out = []
    for shots in queries:
        s = cosine_similarity(shots, X).mean(axis=0)
        out.append(np.argsort(-s, kind="stable")[:top])
    return out, time.perf_counter() - t


def faiss_batched(queries: list[np.ndarray], X: np.ndarray, top: int) -> tuple[list[np.ndarray], float, float]:
    import faiss

    from eventatlas.evaluation.retrieval import query_vectors

    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(X.shape[1])
    index.add(_unit(X))
    t1 = time.perf_counter()
    _, ids = index.search(query_vectors(queries), top)
    return list(ids), t1 - t0, time.perf_counter() - t1


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--pool", default=None, help="an embeddings .npy of real mention vectors (the bases)")
    ap.add_argument("--threads", type=int, default=2)
    a = benchmarking.parse_args(ap, argv, smoke={"n": 3000, "queries": 5})
    bench = benchmarking.Benchmark("emr", a, libraries=("faiss-cpu",))
    import faiss

    faiss.omp_set_num_threads(a.threads)
    rng = np.random.default_rng(SEED)
    t = time.perf_counter()
    X, owner, source = corpus(a.n, a.pool, rng)
    gen_s = time.perf_counter() - t
    by_base: dict[int, np.ndarray] = {}
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(owner.max() + 2))
    big = [b for b in range(owner.max() + 1) if bounds[b + 1] - bounds[b] >= a.k]
    chosen = rng.choice(big, size=a.queries, replace=len(big) < a.queries)
    queries = []
    for b in chosen:
        members = by_base.setdefault(int(b), order[bounds[b]:bounds[b + 1]])
        queries.append(X[rng.choice(members, size=a.k, replace=False)])
    loop_ids, loop_s = loop_baseline(queries, X, a.top)
    faiss_ids, build_s, search_s = faiss_batched(queries, X, a.top)
    overlap = float(np.mean([len(set(p.tolist()) & set(q.tolist())) / a.top for p, q in zip(loop_ids, faiss_ids)]))
    res = {"n": a.n, "d": int(X.shape[1]), "queries": a.queries, "k": a.k, "top": a.top, "seed": SEED,
           "data": source, "generate_s": round(gen_s, 2), "threads": a.threads,
           "loop_s": round(loop_s, 3), "loop_ms_per_query": round(1000 * loop_s / a.queries, 2),
           "faiss_build_s": round(build_s, 3), "faiss_search_s": round(search_s, 3),
           "faiss_ms_per_query": round(1000 * search_s / a.queries, 2),
           "ratio_incl_build": round(loop_s / (build_s + search_s), 1),
           "ratio_search_only": round(loop_s / search_s, 1), "top_overlap": round(overlap, 4),
           "machine": platform.processor() or platform.machine(), "python": platform.python_version()}
    print(json.dumps(res, indent=2))
    bench.finish([benchmarking.case("s", build_s + search_s, loop_s, higher_is_better=False, setting=f"n={a.n}",
                                    ours_label="faiss batched (build + search)", baseline_label="per-query loop")], res)


if __name__ == "__main__":
    main()
