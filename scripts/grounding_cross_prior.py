"""Does a grounding run's cross-encoder rank by the candidate's identity?

    python scripts/grounding_cross_prior.py DATASET_DIR RUN_DIR [--split dev] [--n 300]

For a run trained with ``cross_encoder: true`` (its saved bi-encoder ``VARIANT/model`` +
``candidate_vectors.npy`` and ``cross/model`` + ``cross/head.pt``): rebuild ``--n`` mentions' top-k lists
of ``--split`` exactly as the run did, re-score them with the cross-encoder, and report how often the
top-1 of each model is a *training-gold* event (a gold of some training mention: in a zero-shot split
never right) or a gold, and the cross-encoder's mean score of golds, of wrong training-gold events and of
the other candidates. About 1.5 CPU minutes on one core for 300 mentions x 8 candidates.

``--smoke``: a one-epoch cross-encoder run of a tiny random BERT on the shipped FrameNet grounding sample,
trained first in a temporary data root (seconds).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.grounding import biencoder as B  # noqa: E402
from eventatlas.grounding import crossencoder as X  # noqa: E402
from eventatlas.grounding.data import load  # noqa: E402
from eventatlas.methods.grounding import GroundingConfig, _vectors  # noqa: E402
from eventatlas.modeling.mention_encoder import MentionEncoder  # noqa: E402
from eventatlas.store import benchmarking  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", nargs="?")
    ap.add_argument("run_dir", type=Path, nargs="?")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--n", type=int, default=300, help="mentions sampled from the split")
    a = benchmarking.parse_args(ap, argv, publish=False)
    if a.smoke:
        import _smoke

        scratch = benchmarking.scratch_dir(a, "grounding_cross_prior")
        a.dataset_dir = _smoke.grounding_dataset(scratch)
        a.run_dir = _smoke.grounding_run(a.dataset_dir, scratch, ["baseline"], cross=True)
        a.n = 8
    if a.dataset_dir is None or a.run_dir is None:
        ap.error("DATASET_DIR and RUN_DIR are required (or --smoke)")
    run = a.run_dir
    if not (run / "grounding.json").is_file():
        raise SystemExit(f"{run}: not a grounding run directory (no grounding.json)")
    g = json.loads((run / "grounding.json").read_text())
    if "cross" not in g:
        raise SystemExit(f"{run}: no cross-encoder in this run (trained without cross_encoder: true)")
    cfg = GroundingConfig.model_validate(g["config"])
    seed = json.loads((run / "run.json").read_text())["run"]["seed"]
    chosen = g["cross"]["bi_encoder"]
    # the run's own training subsample (same cap and seed), so "training-gold" means what the run saw
    gd = load(a.dataset_dir, max_mentions={"train": cfg.max_train_mentions, a.split: a.n}, seed=seed,
              splits=("train", a.split))
    train_golds, ms = gd.events_of("train"), gd.splits[a.split]
    bi = MentionEncoder(run / chosen / "model", max_length=cfg.max_length)
    mv = _vectors(bi, B.mention_inputs(bi, ms), cfg, "cpu", pool=cfg.mention_pool)
    tops, _ = B.retrieve(mv, np.load(run / chosen / "candidate_vectors.npy"), min(cfg.cross_k, len(gd.type_ids)))
    enc = MentionEncoder(run / "cross" / "model", max_length=cfg.cross_max_length)
    # the pairs exactly as the run built them
    pairs = X.mention_pairs(enc, ms, tops.tolist(), B.candidate_inputs(enc, gd), cfg.cross_mention_length)
    model = X.CrossEncoder(enc)
    model.head.load_state_dict(torch.load(run / "cross" / "head.pt", weights_only=True))
    sc = X.score_pairs(model, pairs, device="cpu")
    seen = np.isin(tops, sorted(train_golds))
    gold = np.array([[c in set(ms.golds[i]) for c in row] for i, row in enumerate(tops.tolist())])
    r, top1 = np.arange(len(tops)), sc.argmax(1)
    print(f"{run.name} {a.split}: {len(tops)} mentions x {tops.shape[1]}; training-gold events are "
          f"{seen.mean() * 100:.1f} % of the list entries")
    print(f"  top-1 is a training-gold event: bi-encoder {seen[:, 0].mean() * 100:.1f} %, cross-encoder "
          f"{seen[r, top1].mean() * 100:.1f} %")
    print(f"  top-1 is a gold: bi-encoder {gold[:, 0].mean() * 100:.1f} %, cross-encoder {gold[r, top1].mean() * 100:.1f} %")
    for name, m in (("golds", gold), ("wrong training-gold events", seen & ~gold), ("other candidates", ~seen & ~gold)):
        print(f"  mean cross-encoder score of {name}: {sc[m].mean() if m.any() else float('nan'):.3f} ({int(m.sum())} entries)")


if __name__ == "__main__":
    main()
