"""Events/s of one SWCC training step (5 encoder passes per event: q, k1, k2, p, m), and the step as
implemented vs the obvious baseline, measured in one run on the same events and initial weights.

* implemented: the :class:`eventatlas.swcc.task.SWCCTask` step on length-bucketed batches
  (:class:`eventatlas.training.BucketBatchSampler`, dynamic padding) of cached token ids, the MLM head
  applied at the masked positions only (one per event);
* baseline: random batches of the same size (dynamic padding still), the MLM head applied to every
  position (B x T x vocab logits), as a straightforward ``AutoModelForMaskedLM``-style loss does.

Both run ``--steps`` optimizer steps (Adam) of ``--batch-size`` events from the real NYT event tuples
(``../shared/data/event_tuples``; the shipped sample when absent or with ``--smoke``), after one warm-up
step. Prints events/s, real tokens/s, padding share and the ratio, and records them as a benchmark run
(``eventatlas.store.benchmarking``: run record, published to the warehouse).

    python benchmarks/bench_swcc.py [--steps 5] [--batch-size 64] [--events 2048] [--threads 1] [--smoke]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> None:
    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--events", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None)
    a = benchmarking.parse_args(ap, argv, smoke={"steps": 1, "batch_size": 4, "events": 32})
    bench = benchmarking.Benchmark("swcc", a)

    import numpy as np
    import torch

    from eventatlas.config import datasets_dir, samples_dir, shared_data
    from eventatlas.data.ingest import ingest
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.tokens import tokenize_cached
    from eventatlas.swcc.data import load_events
    from eventatlas.swcc.losses.mlm import mlm_loss
    from eventatlas.swcc.model import SWCCModel
    from eventatlas.swcc.task import SWCCTask
    from eventatlas.training import BucketBatchSampler

    torch.set_num_threads(a.threads)
    src = shared_data() / "event_tuples" / "nyt_inverse_cloze_docs.txt"
    if not src.exists() or a.smoke:
        src = samples_dir() / "event_tuples" / "tuples_sample.txt"
    ddir = datasets_dir() / "event_tuples"  # an ingested copy is reused
    if not (ddir / "manifest.json").exists():
        ddir = benchmarking.scratch_dir(a, bench.run_id) / "et"
        ingest("event_tuples", src, out_dir=ddir)
    events = load_events(ddir, max_events=a.events, seed=0)
    enc = MentionEncoder(a.model, max_length=32)
    t0 = time.perf_counter()
    items, hit = tokenize_cached(enc, events.texts, [0] * len(events), [len(t) for t in events.texts], "sentence")
    t_tok = time.perf_counter() - t0
    model = SWCCModel(enc, n_prototypes=10, mlm=True)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    task = SWCCTask(model, items, events, pooling_rep="cls")
    lengths = task.lengths()

    def batches(bucket: bool):
        s = BucketBatchSampler(lengths, a.batch_size, seed=0, bucket=bucket, drop_last=True)
        return s.batches(0)[: a.steps + 1]

    def run(name: str, t: SWCCTask, bucket: bool) -> dict:
        model.load_state_dict(init)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=2e-5)
        rng = np.random.default_rng(0)
        real = padded = 0
        secs = 0.0
        for k, idx in enumerate(batches(bucket)):
            batch = t.make_batch(np.asarray(idx), rng)
            t1 = time.perf_counter()
            loss, _ = t.loss(model, batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
            dt = time.perf_counter() - t1
            if k:  # the first step warms up
                secs += dt
                for v in (batch["views"], batch["m"]):
                    real += int(v["attention_mask"].sum())
                    padded += v["attention_mask"].numel()
        n = a.steps * a.batch_size
        out = {"events_per_s": n / secs, "real_tokens_per_s": real / secs, "padding_share": 1 - real / padded,
               "seconds": secs}
        print(f"{name:12s} {out['events_per_s']:8.2f} events/s  {out['real_tokens_per_s']:9.0f} tok/s  "
              f"padding {out['padding_share']:.3f}")
        return out

    class Baseline(SWCCTask):
        def loss(self, model, batch):
            m = batch["m"]
            sw = self.sw
            self.sw = type(sw)(weak=sw.weak, second_view=sw.second_view, prototypes=sw.prototypes, mlm=False)
            try:
                loss, terms = SWCCTask.loss(self, model, batch)
            finally:
                self.sw = sw
            logits = model.mlm_head(model.token_states(m["input_ids"], m["attention_mask"]))
            return loss + self.gamma * mlm_loss(logits, m["labels"]), terms

    base = Baseline(model, items, events, pooling_rep="cls")
    res = {"implemented": run("implemented", task, True), "baseline": run("baseline", base, False)}
    res["ratio_events_per_s"] = res["implemented"]["events_per_s"] / res["baseline"]["events_per_s"]
    res.update({"steps": a.steps, "batch_size": a.batch_size, "events": len(events), "threads": a.threads,
                "encoder_passes_per_event": 5, "tokenize_seconds": t_tok, "token_cache_hit": hit,
                "mlm_head": model.mlm_source, "source": str(src)})
    print(f"ratio implemented / baseline: {res['ratio_events_per_s']:.2f}x")
    bench.finish([benchmarking.case("events/s", res["implemented"]["events_per_s"], res["baseline"]["events_per_s"],
                                    higher_is_better=True, setting=f"batch {a.batch_size}, {a.threads} thread(s)",
                                    ours_label="bucketed, MLM at masked positions",
                                    baseline_label="random batches, MLM at every position", precision="fp32")], res)


if __name__ == "__main__":
    main()
