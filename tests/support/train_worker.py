"""A tiny, deterministic training job run in a subprocess by tests/training/test_training.py (kill / resume).

python tests/support/train_worker.py MODEL_DIR OUT_DIR [--resume] [--sleep S] [--epochs N] [--hang-at K --hang-file F]

``--hang-at K``: the K-th loss computation touches ``--hang-file`` and then blocks, so a test can
SIGKILL the job at a known point mid-step instead of racing a running job with a poll loop.
Prints the final weights' checksum path on success.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

SENTS = [("The army attacked the town .", "attacked", 0), ("Rebels attacked a convoy .", "attacked", 0),
         ("Gunmen attacked the base at night .", "attacked", 0), ("The king died in Paris .", "died", 1),
         ("Two miners died after the collapse .", "died", 1), ("The poet died at home .", "died", 1),
         ("Leaders met in Geneva .", "met", 2), ("The envoy met the rebel commander today .", "met", 2),
         ("Ministers met to discuss the trade deal .", "met", 2)] * 3


class Head(torch.nn.Module):
    def __init__(self, encoder, n):
        super().__init__()
        self.encoder = encoder
        self.drop = torch.nn.Dropout(0.3)
        self.out = torch.nn.Linear(encoder.hidden_size, n)


class Task:
    def __init__(self, enc, sleep: float, hang_at: int = 0, hang_file: str | None = None):
        s = [x[0] for x in SENTS]
        a = [x[0].index(x[1]) for x in SENTS]
        self.items = enc.prepare(s, a, [i + len(x[1]) for i, x in zip(a, SENTS)], "trigger")
        self.y = torch.tensor([x[2] for x in SENTS])
        self.enc, self.sleep = enc, sleep
        self.hang_at, self.hang_file, self.calls = hang_at, hang_file, 0
        self.seen: list[list[int]] = []  # batches this process trained on (data-parallel test)

    def lengths(self):
        return [len(it.ids) for it in self.items]

    def make_batch(self, idx, rng):
        self.seen.append([int(i) for i in idx])
        b = self.enc.collate([self.items[i] for i in idx], "trigger")
        b["y"] = self.y[idx]
        b["noise"] = torch.from_numpy(rng.normal(size=len(idx)).astype(np.float32))  # exercises the task RNG
        return b

    def loss(self, model, b):
        if self.sleep:
            time.sleep(self.sleep)
        self.calls += 1
        if self.calls == self.hang_at:
            with open(self.hang_file, "w") as f:
                f.write(str(self.calls))
            time.sleep(3600)  # until the test kills us
        v = model.encoder(b["input_ids"], b["attention_mask"], b["pool"], "trigger")
        logits = model.out(model.drop(v)) + 0.01 * b["noise"][:, None]
        loss = torch.nn.functional.cross_entropy(logits, b["y"])
        return loss, {"ce": float(loss.detach())}


def build(model_dir: str, out: str, epochs: int, sleep: float, hang_at: int = 0, hang_file: str | None = None):
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.training import Trainer, TrainingArgs

    torch.manual_seed(0)
    enc = MentionEncoder(model_dir, max_length=32)
    model = Head(enc, 3)
    args = TrainingArgs(epochs=epochs, batch_size=4, lr=1e-3, head_lr=5e-3, warmup_steps=2, schedule="linear",
                        checkpoint_every=2, keep_checkpoints=2, device="cpu", precision="fp32", threads=1,
                        progress=False)
    return model, Trainer(model, Task(enc, sleep, hang_at, hang_file), args, out, seed=3)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("out")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--hang-at", type=int, default=0)
    p.add_argument("--hang-file")
    a = p.parse_args(argv)
    model, tr = build(a.model_dir, a.out, a.epochs, a.sleep, a.hang_at, a.hang_file)
    tr.fit(resume=a.resume)
    rank = tr.accelerator.process_index
    name = "final.pt" if tr.accelerator.num_processes == 1 else f"final_rank{rank}.pt"
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, f"{a.out}/{name}")
    if tr.accelerator.num_processes > 1:
        import json

        with open(f"{a.out}/batches_rank{rank}.json", "w") as f:
            json.dump(tr.task.seen, f)
    print("done", tr.state.step)


if __name__ == "__main__":
    main(sys.argv[1:])
