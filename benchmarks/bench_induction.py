"""Training-step throughput of the induction trainer: length bucketing and bf16 vs the obvious baseline.

Baseline = random batches (no bucketing) in fp32. Each configuration trains the same number of steps
on the same OntoEvent-MAVEN mentions from a fresh copy of the model, in this one process, and the
script prints mentions/second and the ratio to the baseline (plus the padding fraction).

    python benchmarks/bench_induction.py --steps 30 [--threads 2] [--out benchmarks/results/induction.json]

Needs ../shared/data/ontoevent_maven (or --dataset-dir of an ingested OntoEvent dataset).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _dataset(path: str | None) -> Path:
    if path:
        return Path(path)
    from eventatlas.config import shared_data
    from eventatlas.io import DatasetWriter, Rejects
    from eventatlas.readers import ontoevent

    src = shared_data() / "ontoevent_maven"
    if not src.exists():
        sys.exit(f"{src} is absent: pass --dataset-dir of an ingested OntoEvent dataset")
    out = Path(tempfile.mkdtemp()) / "ontoevent_maven"
    with DatasetWriter(out, "ontoevent_maven") as w:
        for t, row in ontoevent.read(src, rejects=Rejects("ontoevent_maven")):
            w.write(t, row)
        w.commit({"reader": "ontoevent"})
    return out


def main() -> None:
    import torch

    from eventatlas.induction.data import load_mentions
    from eventatlas.induction.train import TrainConfig, Trainer

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dataset-dir", default=None)
    ap.add_argument("--rep", default="trigger")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    data = load_mentions(_dataset(a.dataset_dir), 10)
    configs = [("baseline random fp32", False, "fp32"), ("bucketed fp32", True, "fp32"),
               ("random bf16", False, "bf16"), ("bucketed bf16", True, "bf16")]
    results = []
    for name, bucket, prec in configs:
        cfg = TrainConfig(representation=a.rep, epochs=1, max_steps_per_epoch=a.steps, bucket=bucket,
                          precision=prec, threads=a.threads, keep_checkpoints="none", naming_weight=0, seed=0)
        with tempfile.TemporaryDirectory() as tmp:
            tr = Trainer(data, cfg, tmp)
            tr.embed = lambda idx: {"F": torch.zeros(0)}  # noqa: E731 - time training steps only
            tr._score = lambda emb, counts: {0: 0.0}  # noqa: E731
            tr._save_epoch = lambda name, emb: Path(tmp) / "x"  # noqa: E731
            t0 = time.perf_counter()
            s = tr.fit()
            wall = time.perf_counter() - t0
        h = s["history"][0]
        mps = h["steps"] * cfg.batch_size / h["train_seconds"]
        results.append({"config": name, "steps": h["steps"], "train_seconds": h["train_seconds"],
                        "mentions_per_s": mps, "padding_fraction": h["padding_fraction"], "wall": wall})
    base = results[0]["mentions_per_s"]
    for r in results:
        r["speedup_vs_baseline"] = r["mentions_per_s"] / base
        print(f"{r['config']:24s} {r['mentions_per_s']:7.2f} mentions/s  x{r['speedup_vs_baseline']:.2f}  "
              f"padding {100 * r['padding_fraction']:.1f}%")
    if a.out:
        from eventatlas.io import atomic_write_json

        atomic_write_json(a.out, {"steps": a.steps, "threads": a.threads, "results": results})


if __name__ == "__main__":
    main()
