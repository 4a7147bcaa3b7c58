"""Sanity checks for the grounding bi-encoder: zero-shot and lexical baselines, and
where a trained variant's top-1 lands.

    python scripts/grounding_diagnose.py DATASET_DIR                 # untuned MiniLM + TF-IDF, dev/test
    python scripts/grounding_diagnose.py DATASET_DIR RUN_DIR/VARIANT # a trained variant, train/dev/test

For each split: Recall@1/4/8/16 and Recall@min under the dot product and the cosine, with the mention
pooled over the whole window (``sentence``) or the marked span (``trigger``, untuned only), and the
share of mentions whose top-1 is a training event / an event of the scored split. The untuned rows
with ``sentence`` pooling equal the method's ``untuned`` variant (dot: ``score: dot``; cos: ``score:
cosine``). It takes 1-5 CPU minutes on one core. ``--smoke``: the untuned rows on the shipped FrameNet
grounding sample (ingested into a temporary data root).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas.evaluation._vectors import unit_rows  # noqa: E402
from eventatlas.evaluation.grounding import grounding_scores  # noqa: E402
from eventatlas.grounding import biencoder as B  # noqa: E402
from eventatlas.grounding.data import load  # noqa: E402
from eventatlas.modeling.mention_encoder import MentionEncoder  # noqa: E402
from eventatlas.store import benchmarking  # noqa: E402


def report(name: str, ids: np.ndarray, golds, train_events: set[int], split_events: set[int]) -> None:
    s = grounding_scores([list(r) for r in ids], golds, ks=(1, 4, 8, 16))
    print(f"{name:32s}", {k: round(v * 100, 1) for k, v in s.items() if k.startswith("recall")},
          "| top-1 a training event %", round(np.mean([r[0] in train_events for r in ids]) * 100, 1),
          "| top-1 an event of the split %", round(np.mean([r[0] in split_events for r in ids]) * 100, 1), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", nargs="?")
    ap.add_argument("variant_dir", nargs="?", help="RUN_DIR/VARIANT of a grounding run (model/ + candidate_vectors.npy)")
    ap.add_argument("--train-mentions", type=int, default=2000, help="the seeded training subsample (as the run's)")
    ap.add_argument("--seed", type=int, default=0)
    a = benchmarking.parse_args(ap, argv, publish=False)
    if a.smoke:
        import _smoke

        a.dataset_dir = _smoke.grounding_dataset(benchmarking.scratch_dir(a, "grounding_diagnose"))
    if a.dataset_dir is None:
        ap.error("DATASET_DIR is required (or --smoke)")
    gd = load(a.dataset_dir, max_mentions={"train": a.train_mentions}, seed=a.seed)
    tr = gd.events_of("train")
    if a.variant_dir:
        enc = MentionEncoder(f"{a.variant_dir}/model", max_length=128)
        cv = np.load(f"{a.variant_dir}/candidate_vectors.npy")
        splits, pools = ("train", "dev", "test"), ("sentence",)
    else:
        enc = MentionEncoder(None, max_length=128)
        B.add_markers(enc)
        cv = B.embed_items(enc, B.candidate_inputs(enc, gd), device="cpu")
        splits, pools = ("dev", "test"), ("sentence", "trigger")
    for split in splits:
        ms = gd.splits[split]
        for pool in pools:
            mv = B.embed_items(enc, B.mention_inputs(enc, ms, cache=False), device="cpu", pool=pool)
            for score, (m, c) in {"dot": (mv, cv), "cos": (unit_rows(mv, "mentions"), unit_rows(cv, "candidates"))}.items():
                ids, _ = B.retrieve(m, c, 16)
                report(f"{split} {pool} {score}", ids, ms.golds, tr, gd.events_of(split))
        if not a.variant_dir:  # lexical: TF-IDF of the trigger / the sentence against title + description
            from sklearn.feature_extraction.text import TfidfVectorizer

            vec = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit(gd.candidate_texts())
            C = vec.transform(gd.candidate_texts())
            for what in ("trigger", "sentence"):
                q = [s[i:j] if what == "trigger" else s for s, i, j in zip(ms.sentences, ms.starts, ms.ends)]
                ids = np.argsort(-(vec.transform(q) @ C.T).toarray(), axis=1, kind="stable")[:, :16]
                report(f"{split} tfidf {what}", ids, ms.golds, tr, gd.events_of(split))


if __name__ == "__main__":
    main()
