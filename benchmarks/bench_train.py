"""Training throughput of the shared training core vs the obvious naive loop, measured in one run.

Both train the same model (a mention encoder + a linear type classifier, trigger representation,
cross-entropy over the OntoEvent-MAVEN types) on the same mentions for the same number of optimizer
steps with the same batch size, from the same initial weights:

* naive: every epoch re-tokenizes all sentences, pads every batch to ``max_length``, random batches,
  fp32, a plain ``for`` loop with AdamW;
* core:  :class:`eventatlas.training.Trainer` with the cached token ids, length-bucketed batches with
  dynamic padding and the precision the CPU probe picks (bf16 autocast where measured faster).

Printed and recorded as a benchmark run (``eventatlas.store.benchmarking``: run record, published to the
warehouse): steps/s, examples/s, tokens/s (real, non-pad tokens), the ratio core / naive, and the padding
share of: pad-to-max, random batches with dynamic padding, and bucketed batches.

    python benchmarks/bench_train.py [--steps 40] [--epochs 2] [--batch-size 32] [--model all-MiniLM-L6-v2]
                                     [--device auto] [--threads 2] [--smoke]

Needs ../shared/data/ontoevent_maven (the real sentences; ``--smoke``: the shipped OntoEvent sample); the
model defaults to the packaged MiniLM.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def load_mentions(n: int, sample: bool = False):
    from eventatlas.config import samples_dir, shared_data
    from eventatlas.io import Rejects
    from eventatlas.readers import ontoevent

    src = samples_dir() / "ontoevent" if sample else shared_data() / "ontoevent_maven"
    if not src.exists():
        sys.exit(f"{src} is absent (set EVENTATLAS_SHARED_DATA): the benchmark needs real sentences")
    rows = [r for t, r in ontoevent.read(src, rejects=Rejects("o")) if t == "mentions"][:n]
    types = sorted({r["labels"][0] for r in rows})
    return ([r["sentence"] for r in rows], [r["trigger_start"] for r in rows], [r["trigger_end"] for r in rows],
            [types.index(r["labels"][0]) for r in rows], len(types))


class Classifier:
    """Built lazily so torch is imported after the thread count is set."""

    @staticmethod
    def make(model_id, n_types, max_length, seed):
        import torch

        from eventatlas.modeling.mention_encoder import MentionEncoder

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = MentionEncoder(model_id, max_length=max_length)
                self.head = torch.nn.Linear(self.encoder.hidden_size, n_types)

        torch.manual_seed(seed)
        return Net()


class CoreTask:
    def __init__(self, net, items, labels):
        import torch

        self.net, self.items, self.y = net, items, torch.tensor(labels)

    def lengths(self):
        return [len(it.ids) for it in self.items]

    def make_batch(self, idx, rng):
        b = self.net.encoder.collate([self.items[i] for i in idx], "trigger")
        b["y"] = self.y[idx]
        return b

    def loss(self, model, b):
        import torch.nn.functional as F

        v = model.encoder(b["input_ids"], b["attention_mask"], b["pool"], "trigger")
        loss = F.cross_entropy(model.head(v).float(), b["y"])
        return loss, {}


def naive_loop(net, sents, starts, ends, labels, *, steps, batch_size, max_length, lr, device, seed):
    """Re-tokenize every epoch, pad to max_length, random batches, fp32."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    tok = net.encoder.tokenizer
    net.to(device).train()
    opt = torch.optim.AdamW(net.parameters(), lr=lr)
    y = torch.tensor(labels)
    rng = np.random.default_rng(seed)
    done, real_tokens, t0, epoch = 0, 0, time.perf_counter(), 0
    while done < steps:
        enc = tok(sents, padding="max_length", truncation=True, max_length=max_length, return_offsets_mapping=True,
                  return_tensors="pt")
        offs = enc["offset_mapping"]
        pool = ((offs[..., 0] < torch.tensor(ends)[:, None]) & (offs[..., 1] > torch.tensor(starts)[:, None])
                & (offs[..., 1] > offs[..., 0])).float()
        order = rng.permutation(len(sents))
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = torch.from_numpy(order[i:i + batch_size])
            ids, att, pl = enc["input_ids"][idx].to(device), enc["attention_mask"][idx].to(device), pool[idx].to(device)
            v = net.encoder(ids, att, pl, "trigger")
            loss = F.cross_entropy(net.head(v), y[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            real_tokens += int(att.sum())
            done += 1
            if done >= steps:
                break
        epoch += 1
    return time.perf_counter() - t0, real_tokens


def main(argv: list[str] | None = None) -> None:
    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps of each loop")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--n", type=int, default=640, help="mentions (steps x batch over n = epochs, re-tokenized "
                                                        "by the naive loop every epoch)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="auto", help="the core's: auto (the CPU probe decides) | fp32 | bf16")
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    a = benchmarking.parse_args(ap, argv, smoke={"steps": 2, "batch_size": 4, "n": 16, "max_length": 32, "threads": 1})
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    from eventatlas.modeling.device import describe, resolve_device, resolve_precision
    from eventatlas.modeling.tokens import tokenize_cached
    from eventatlas.training import BucketBatchSampler, Trainer, TrainingArgs, padding_fraction

    device = resolve_device(a.device)
    bench = benchmarking.Benchmark("train", a, device=device)
    sents, starts, ends, labels, n_types = load_mentions(a.n, sample=a.smoke)
    results: dict = {"device": describe(device), "model": a.model or "all-MiniLM-L6-v2", "steps": a.steps,
                     "batch_size": a.batch_size, "mentions": len(sents), "max_length": a.max_length}

    # naive first (it also warms the page cache for the weights; the core is then not favoured by order
    # in any way that matters: both load the model from disk before timing)
    net = Classifier.make(a.model, n_types, a.max_length, 0)
    t_naive, tok_naive = naive_loop(net, sents, starts, ends, labels, steps=a.steps, batch_size=a.batch_size,
                                    max_length=a.max_length, lr=2e-5, device=device, seed=0)
    del net

    net = Classifier.make(a.model, n_types, a.max_length, 0)
    with tempfile.TemporaryDirectory() as tmp:
        t_tok = time.perf_counter()
        items, _ = tokenize_cached(net.encoder, sents, starts, ends, "trigger", cache_dir=Path(tmp) / "tok")
        tokenize_s = time.perf_counter() - t_tok
        epochs = math.ceil(a.steps * a.batch_size / len(sents)) + 1
        args = TrainingArgs(epochs=epochs, max_steps=a.steps, batch_size=a.batch_size, lr=2e-5, device=device,
                            threads=a.threads, schedule="constant", progress=False, drop_last=True,
                            precision="fp32" if a.smoke else a.precision)
        trainer = Trainer(net, CoreTask(net, items, labels), args, Path(tmp) / "run", seed=0)
        t0 = time.perf_counter()
        res = trainer.fit()
        t_core = time.perf_counter() - t0
        import pyarrow.parquet as pq

        steps = pq.read_table(res.steps_path).to_pylist()
    lengths = np.array([len(it.ids) for it in items])
    # real tokens the core trained on: every step's tokens/s x its duration (= examples / examples/s)
    tok_core = sum(r["tokens_per_s"] * a.batch_size / r["examples_per_s"] for r in steps)
    rand = BucketBatchSampler(lengths, a.batch_size, seed=0, bucket=False, drop_last=True)
    buck = BucketBatchSampler(lengths, a.batch_size, seed=0, bucket=True, drop_last=True)
    pad_max = 1.0 - float(np.minimum(lengths, a.max_length).mean()) / a.max_length
    results.update({
        "naive": {"seconds": t_naive, "steps_per_s": a.steps / t_naive, "examples_per_s": a.steps * a.batch_size / t_naive,
                  "tokens_per_s": tok_naive / t_naive, "precision": "fp32", "padding_fraction": pad_max},
        "core": {"seconds": t_core, "steps_per_s": a.steps / t_core, "examples_per_s": a.steps * a.batch_size / t_core,
                 "tokens_per_s": tok_core / t_core, "precision": res.precision,
                 "padding_fraction": float(np.mean([r["padding_fraction"] for r in steps])),
                 "tokenize_once_s": tokenize_s},
        "padding_share": {"pad_to_max_length": pad_max, "random_dynamic": padding_fraction(lengths, rand.batches(0)),
                          "bucketed_dynamic": padding_fraction(lengths, buck.batches(0))},
        "precision_probe": None if a.smoke else resolve_precision("auto", device, shape=net.encoder.shape(), mode="train"),
    })
    results["ratio_core_over_naive"] = results["core"]["steps_per_s"] / results["naive"]["steps_per_s"]
    n, c, p = results["naive"], results["core"], results["padding_share"]
    print(f"{results['device']}, {results['model']}, {a.steps} steps x batch {a.batch_size}")
    print(f"naive: {n['steps_per_s']:.2f} steps/s, {n['examples_per_s']:.1f} ex/s, {n['tokens_per_s']:.0f} tok/s (fp32)")
    print(f"core : {c['steps_per_s']:.2f} steps/s, {c['examples_per_s']:.1f} ex/s, {c['tokens_per_s']:.0f} tok/s "
          f"({c['precision']})")
    print(f"ratio core/naive: {results['ratio_core_over_naive']:.2f}x")
    print(f"padding share: pad-to-{a.max_length} {p['pad_to_max_length']:.1%}, random batches "
          f"{p['random_dynamic']:.1%}, bucketed {p['bucketed_dynamic']:.1%}")
    bench.finish([benchmarking.case("steps/s", c["steps_per_s"], n["steps_per_s"], higher_is_better=True,
                                    setting=f"batch {a.batch_size}, max length {a.max_length}",
                                    ours_label=f"training core ({c['precision']})", baseline_label="naive loop (fp32)",
                                    precision=c["precision"])], results, out=a.out)


if __name__ == "__main__":
    main()
