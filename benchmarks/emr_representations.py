"""Diagnostic: how well each frozen representation separates event types (EMR).

For every representation of the dataset's EMR pool (cached embeddings, :func:`eventatlas.methods.emr.embed_pool`):
anisotropy (mean cosine of 20,000 random pairs), mean cosine of same-type and of other-type labelled
pairs, 1-NN type accuracy over the labelled mentions, and the ad-hoc MAP of the paper's k = 5
episodes (:func:`eventatlas.emr.episodes.sample_episode`, seeds 0..reps-1) on the raw vectors and
after subtracting the pool mean (centring). Not a speed benchmark: one JSON line per representation.
Memory: the labelled mentions' n x n cosine matrix (9,562^2 floats for the MAVEN subset).

Usage:  python benchmarks/emr_representations.py DATASET_DIR [--reps 5] [--representations window4 trigger ...]
        python benchmarks/emr_representations.py --smoke   # the shipped MAVEN sentences sample, one representation
The embedding cache goes to a scratch directory under the data root (removed afterwards).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.store import benchmarking  # noqa: E402


def diagnose(dataset_dir: Path, representation: str, reps: int = 5, seed: int = 0, *, cache: Path,
             episode: dict | None = None) -> dict:
    """``episode``: :func:`eventatlas.emr.episodes.sample_episode` sizes (default: the paper's, 10 queries per type)."""
    from eventatlas.emr.episodes import candidate_pool, sample_episode
    from eventatlas.evaluation.base import RowKey
    from eventatlas.evaluation.retrieval import evaluate_retrieval
    from eventatlas.methods.emr import EMRConfig, embed_pool

    pool, X, _ = embed_pool(candidate_pool(dataset_dir, seed=seed), cache, EMRConfig(), "cpu",
                            representation=representation)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    lab = np.array([x if x is not None else "" for x in pool["label"].to_pylist()])
    rng = np.random.default_rng(seed)
    a, b = rng.integers(len(U), size=(2, 20000))
    L = np.flatnonzero(lab != "")
    S = U[L] @ U[L].T
    np.fill_diagonal(S, -np.inf)
    nn_acc = float((lab[L][np.argmax(S, 1)] == lab[L]).mean())
    np.fill_diagonal(S, np.nan)
    same = lab[L][:, None] == lab[L][None, :]
    out = {"representation": representation, "dim": int(X.shape[1]),
           "mean_cos_random_pairs": round(float((U[a] * U[b]).sum(1).mean()), 3),
           "mean_cos_same_type": round(float(np.nanmean(np.where(same, S, np.nan))), 3),
           "mean_cos_other_type": round(float(np.nanmean(np.where(~same, S, np.nan))), 3),
           "nn1_type_acc": round(nn_acc, 3)}
    del S, same
    for name, Z in (("raw", X), ("centred", X - X.mean(0, keepdims=True))):
        maps = []
        for r in range(reps):
            ep = sample_episode(pool, ks=(5,), seed=r, **(episode or {"queries_per_type": 10}))
            rows = evaluate_retrieval([Z[q.shots] for q in ep.queries[5]], Z[ep.corpus], ep.relevant(5), ks=(10,),
                                      key=RowKey(dataset=dataset_dir.name, method="emr", seed=seed))
            maps.append(next(x["value"] for x in rows if x["metric"] == "map"))
        out[f"adhoc_map_k5_{name}"] = [round(float(np.mean(maps)), 3), round(float(np.std(maps, ddof=1)), 3)]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path, nargs="?", help="an ingested dataset directory (required unless --smoke)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--representations", nargs="+", default=["window4", "trigger", "sentence", "mask"])
    args = benchmarking.parse_args(ap, argv, publish=False)
    scratch = benchmarking.scratch_dir(args, "emr_representations")
    episode = None
    if args.smoke:
        from eventatlas.config import samples_dir
        from eventatlas.data.ingest import ingest

        args.dataset_dir = scratch / "emr_sample"
        ingest("maven_sentences", samples_dir() / "emr" / "emr_sample.json", out_dir=args.dataset_dir,
               dataset="emr_sample", progress=False)
        args.reps, args.representations = 2, ["trigger"]
        # the sample's types have 7-8 mentions: 2 corpus + 5 query mentions per type
        episode = {"min_mentions": 7, "n_corpus": 2, "n_query": 5, "n_dev": 0, "n_none": 4, "queries_per_type": 2}
    if args.dataset_dir is None:
        ap.error("DATASET_DIR is required (an ingested dataset directory), or use --smoke")
    try:
        for rep in args.representations:
            print(json.dumps(diagnose(args.dataset_dir, rep, args.reps, cache=scratch / "cache",
                                      episode=episode)), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
