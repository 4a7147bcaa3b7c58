"""Benchmark: why the grounding pipeline retrieves with the bi-encoder before the cross-encoder.

Compares, in one run, on the same mentions of a grounding dataset and the same encoder weights:
  bi     eventatlas.grounding.biencoder: the candidate pool encoded once (timed, amortised over every
         mention), each mention encoded once and ranked against the pool by one faiss inner-product
         search (``retrieve``);
  cross  the obvious baseline for scoring every candidate: the cross-encoder over every
         (mention, candidate) pair of the pool (what the pipeline avoids by scoring only the top 8).
Reports mentions/s for both, pairs/s of the cross-encoder, and the ratio (bi includes the pool's
one-off encoding). Same model, fp32, one thread (OMP_NUM_THREADS=1).

Usage:  python benchmarks/bench_grounding.py --dataset <dir> [--mentions 4] [--model MODEL]
        python benchmarks/bench_grounding.py --smoke     # the shipped framenet_grounding sample, ingested first
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


def main(argv=None) -> dict:
    import torch

    from eventatlas.grounding import biencoder as B
    from eventatlas.grounding import crossencoder as X
    from eventatlas.grounding.data import Mentions, load
    from eventatlas.modeling.mention_encoder import MentionEncoder

    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", help="an ingested grounding dataset directory (required unless --smoke)")
    ap.add_argument("--mentions", type=int, default=4)
    ap.add_argument("--model", default=None)
    ap.add_argument("--pair-length", type=int, default=160)
    a = benchmarking.parse_args(ap, argv)
    bench = benchmarking.Benchmark("grounding", a)
    if a.smoke and not a.dataset:
        from eventatlas.config import samples_dir
        from eventatlas.data.ingest import ingest

        a.dataset = str(benchmarking.scratch_dir(a, bench.run_id) / "framenet_grounding")
        ingest("framenet_grounding", samples_dir() / "framenet_grounding", out_dir=a.dataset, progress=False)
        a.mentions = 2
    if not a.dataset:
        ap.error("--dataset is required (an ingested grounding dataset directory), or use --smoke")
    gd = load(a.dataset, max_mentions={"test": a.mentions}, splits=("test",), seed=0)
    ms: Mentions = gd.splits["test"]
    enc = MentionEncoder(a.model, max_length=128)
    B.add_markers(enc)
    c_items = B.candidate_inputs(enc, gd)
    m_items = B.mention_inputs(enc, ms, cache=False)
    B.retrieve(B.embed_items(enc, m_items[:1], device="cpu"), B.embed_items(enc, c_items[:8], device="cpu"), 2)  # warm-up
    t0 = time.perf_counter()
    cv = B.embed_items(enc, c_items, device="cpu")
    t_pool = time.perf_counter() - t0
    t0 = time.perf_counter()
    mv = B.embed_items(enc, m_items, device="cpu")
    B.retrieve(mv, cv, 8)
    t_bi = time.perf_counter() - t0

    xenc = MentionEncoder(a.model, max_length=a.pair_length)
    B.add_markers(xenc)
    model = X.CrossEncoder(xenc)
    xm = B.mention_inputs(xenc, ms, budget=xenc.max_length // 2 - 2)
    xc = B.candidate_inputs(xenc, gd)
    pairs = [[X.pair_input(m, c, xenc.max_length) for c in xc] for m in xm]
    X.score_pairs(model, [pairs[0][:2]], device="cpu")  # warm-up
    t0 = time.perf_counter()
    X.score_pairs(model, pairs, device="cpu", batch_mentions=1)
    t_cross = time.perf_counter() - t0
    n, n_pairs = len(ms), sum(len(p) for p in pairs)
    out = {"dataset": gd.dataset, "mentions": n, "candidates": len(gd.type_ids), "threads": torch.get_num_threads(),
           "model": a.model or "all-MiniLM-L6-v2", "pool_encode_s": round(t_pool, 3), "bi_s": round(t_bi, 3),
           "cross_all_pairs_s": round(t_cross, 3), "cross_pairs_per_s": round(n_pairs / t_cross, 2),
           "bi_mentions_per_s_incl_pool": round(n / (t_pool + t_bi), 4), "bi_mentions_per_s_pool_cached": round(n / t_bi, 2),
           "cross_mentions_per_s": round(n / t_cross, 4),
           "ratio_incl_pool": round(t_cross / (t_pool + t_bi), 2), "ratio_pool_cached": round(t_cross / t_bi, 1),
           "python": platform.python_version(), "cpu": platform.processor() or platform.machine()}
    print(json.dumps(out, indent=2))
    bench.finish([benchmarking.case("mentions/s", n / (t_pool + t_bi), n / t_cross, higher_is_better=True,
                                    setting=f"{gd.dataset}, {len(gd.type_ids)} candidates",
                                    ours_label="bi-encoder + faiss (pool encoding included)",
                                    baseline_label="cross-encoder over every pair", precision="fp32")], out)
    return out


if __name__ == "__main__":
    main()
