"""Why the multi-label BCE bi-encoder loses to the softmax baseline on Recall@min.

    python scripts/grounding_loss_diagnose.py DATASET_DIR RUN_DIR [--variants baseline,multilabel] [--n 250]

For a grounding run trained with ``score: cosine`` (its saved ``VARIANT/model`` and unit
``candidate_vectors.npy``), on the run's seeded training subsample (``--train-mentions``, ``--seed``):

* the BCE batches' balance: positives per batch of ``--batch-size`` mentions with ``--negatives`` pool
  negatives (the run's bucketed sampler);
* per variant and split (``--n`` sampled mentions): the cosine of a mention to its golds, to the pool
  negatives and to the split's other events, the share of gold / negative pairs above the BCE threshold
  (logit ``scale * cos + b > 0``, b = -scale/2: the bias starts there and with head_lr 1e-3 moves at most
  ~0.001 per Adam step), the median rank of the atomic gold and of the ancestors, the mean pairwise cosine
  of candidates and of mentions;
* where each loss's gradient goes at the trained weights (pseudo-batches of ``--batch-size`` training
  mentions + the pool negatives): the share of |dL/ds| on positives, on negatives and on *violators*
  (negatives scoring above the row's lowest gold), and the gradient weight per violator relative to the
  weight per positive, for the BCE, the BLINK softmax and the multi-positive softmax.

It takes about 1.5 CPU minutes on one core for two variants. ``--smoke``: a one-epoch ``score: cosine`` run of
a tiny random BERT on the shipped FrameNet grounding sample, trained first in a temporary data root.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.evaluation._vectors import unit_rows  # noqa: E402
from eventatlas.grounding import biencoder as B  # noqa: E402
from eventatlas.grounding.data import load  # noqa: E402
from eventatlas.grounding.losses.multilabel import batch_candidates, multilabel_bce  # noqa: E402
from eventatlas.grounding.losses.multisoftmax import multipositive_softmax  # noqa: E402
from eventatlas.grounding.losses.softmax import batch_targets, softmax_ce  # noqa: E402
from eventatlas.modeling.mention_encoder import MentionEncoder  # noqa: E402
from eventatlas.store import benchmarking  # noqa: E402
from eventatlas.training.sampler import BucketBatchSampler  # noqa: E402


def _subset(ms, idx):
    return type(ms)(*[[getattr(ms, f)[i] for i in idx] for f in ("ids", "sentences", "starts", "ends", "golds")])


def geometry(name, enc, cv, gd, pool, n, scale, rng):
    iu = np.triu_indices(len(cv), 1)
    print(f"\n{name}: candidate pairwise cos {float((cv @ cv.T)[iu].mean()):.3f}", flush=True)
    for split in ("train", "dev", "test"):
        ms = gd.splits[split]
        ms = _subset(ms, np.sort(rng.choice(len(ms), size=min(n, len(ms)), replace=False)))
        mv = unit_rows(B.embed_items(enc, B.mention_inputs(enc, ms, cache=False), device="cpu"), "mentions")
        S = mv @ cv.T
        ev = np.array(sorted(gd.events_of(split)))
        gold, neg, other, up, un, r_atom, r_anc = [], [], [], [], [], [], []
        for i, g in enumerate(ms.golds):
            s = S[i]
            negs = np.setdiff1d(pool, g)
            ns = np.setdiff1d(ev, g)
            gold += [s[c] for c in g]
            neg.append(s[negs].mean())
            if len(ns):
                other.append(s[ns].mean())
            up.append(np.mean(s[g] > 0.5))  # scale * cos - scale / 2 > 0
            un.append(np.mean(s[negs] > 0.5))
            rank = np.empty(len(s), dtype=np.int64)
            rank[np.argsort(-s, kind="stable")] = np.arange(1, len(s) + 1)
            r_atom.append(rank[g[0]])
            r_anc += [rank[c] for c in g[1:]]
        print(f"  {split:5s} cos gold {np.mean(gold):.3f} | pool neg {np.mean(neg):.3f} | split non-gold "
              f"{np.mean(other) if other else float('nan'):.3f} | above threshold: gold {np.mean(up) * 100:.1f} % neg "
              f"{np.mean(un) * 100:.1f} % | median rank atomic {np.median(r_atom):.0f} ancestor "
              f"{np.median(r_anc) if r_anc else float('nan'):.0f} | atomic top-1 {np.mean(np.array(r_atom) == 1) * 100:.1f} % | "
              f"mention pairwise cos {float((mv @ mv.T)[np.triu_indices(len(mv), 1)].mean()):.3f}", flush=True)


def gradients(name, enc, cv, tr, pool, n, bs, n_neg, scale, rng):
    ms = _subset(tr, rng.choice(len(tr), size=min(n, len(tr)), replace=False))
    mv = torch.tensor(unit_rows(B.embed_items(enc, B.mention_inputs(enc, ms, cache=False), device="cpu"), "mentions"))
    cvt = torch.tensor(cv)
    acc = {k: np.zeros(5) for k in ("bce", "softmax", "msoftmax")}  # |g| pos, |g| neg, |g| violators, n pos, n violators
    r = np.random.default_rng(0)
    for s0 in range(0, len(ms) - bs + 1, bs):
        golds = ms.golds[s0:s0 + bs]
        for kind in acc:
            cands, t = batch_targets([g[0] for g in golds]) if kind == "softmax" else batch_candidates(golds)
            free = np.setdiff1d(pool, list(set(cands) | {g for gs in golds for g in gs}))
            cands = cands + r.choice(free, min(n_neg, len(free)), replace=False).tolist()
            S = (scale * mv[s0:s0 + bs] @ cvt[cands].T).requires_grad_(True)
            if kind == "softmax":
                Y = torch.zeros_like(S)
                Y[torch.arange(len(golds)), t] = 1
                loss = softmax_ce(S, t)
            else:
                Y = torch.cat([t, torch.zeros(len(golds), len(cands) - t.shape[1])], 1)
                loss = multilabel_bce(S - scale / 2, Y) if kind == "bce" else multipositive_softmax(S, Y)
            (G,) = torch.autograd.grad(loss, S)
            G, S, Y = G.abs().numpy(), S.detach().numpy(), Y.numpy() > 0
            V = ~Y & (S > np.where(Y, S, np.inf).min(1, keepdims=True))
            acc[kind] += [G[Y].sum(), G[~Y].sum(), G[V].sum(), Y.sum(), V.sum()]
    for kind, (gp, gn, gv, npos, nv) in acc.items():
        print(f"{name} weights, {kind:8s}: |dL/ds| on positives {gp / (gp + gn) * 100:.1f} % negatives {gn / (gp + gn) * 100:.1f} % "
              f"violators {gv / (gp + gn) * 100:.1f} % | {nv / (len(ms) // bs * bs):.2f} violators/mention | weight per "
              f"violator / per positive {(gv / max(nv, 1)) / (gp / npos):.3f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", nargs="?")
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--variants", default="baseline,multilabel")
    ap.add_argument("--n", type=int, default=250, help="mentions sampled per split")
    ap.add_argument("--train-mentions", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--negatives", type=int, default=32)
    ap.add_argument("--scale", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    a = benchmarking.parse_args(ap, argv, publish=False)
    if a.smoke:
        import _smoke

        scratch = benchmarking.scratch_dir(a, "grounding_loss_diagnose")
        a.dataset_dir = _smoke.grounding_dataset(scratch)
        a.run_dir = _smoke.grounding_run(a.dataset_dir, scratch, ["baseline", "multilabel"], score="cosine")
        a.n, a.batch_size, a.negatives, a.train_mentions = 6, 4, 4, 16
    if a.dataset_dir is None or a.run_dir is None:
        ap.error("DATASET_DIR and RUN_DIR are required (or --smoke)")
    gd = load(a.dataset_dir, max_mentions={"train": a.train_mentions}, seed=a.seed)
    tr, pool = gd.splits["train"], np.array(gd.outside_eval())
    enc0 = MentionEncoder(None, max_length=128)
    B.add_markers(enc0)
    items = B.mention_inputs(enc0, tr)
    pos, ent = 0.0, 0
    for b in BucketBatchSampler([len(i.ids) for i in items], a.batch_size, seed=a.seed).batches(0):
        c, y = batch_candidates([tr.golds[i] for i in b])
        pos, ent = pos + float(y.sum()), ent + len(b) * (len(c) + a.negatives)
    print(f"BCE batches: positives {pos / ent * 100:.2f} % of the target entries; golds per mention "
          f"{np.mean([len(g) for g in tr.golds]):.2f}", flush=True)
    for v in a.variants.split(","):
        d = f"{a.run_dir}/{v}"
        enc = MentionEncoder(f"{d}/model", max_length=128)
        cv = unit_rows(np.load(f"{d}/candidate_vectors.npy"), "candidates")
        gradients(v, enc, cv, tr, pool, a.n, a.batch_size, a.negatives, a.scale, np.random.default_rng(a.seed + 1))
        geometry(v, enc, cv, gd, pool, a.n, a.scale, np.random.default_rng(a.seed))


if __name__ == "__main__":
    main()
