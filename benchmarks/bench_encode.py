"""Benchmark: eventatlas Encoder.encode_sentences vs SentenceTransformer.encode.

Same model (packaged all-MiniLM-L6-v2), same sentences, same batch size, same
precision (fp32; and bf16 autocast for both when the CPU/GPU supports it). The two
sides alternate block by block (``--block`` sentences, order flipped every block) so
background load hits both alike; per repeat the block times are summed, and the best
(minimum) repeat per side is reported with all raw times.

    python benchmarks/bench_encode.py [--n 2000] [--batch-size 64] [--repeats 2] [--block 500] [--out benchmarks/results/encode.json]

Sentences: OntoEvent (MAVEN) mention sentences from ../shared/data, else FrameNet
full-text sentences, else the project's samples.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from eventatlas import config  # noqa: E402
from eventatlas.encode import Encoder, bf16_supported, resolve_model  # noqa: E402
from eventatlas.io import atomic_write_json  # noqa: E402


def load_sentences(n: int) -> tuple[list[str], str]:
    shared = config.shared_data()
    onto = shared / "ontoevent_maven" / "event_relation.json"
    if onto.exists():
        seen: dict[str, None] = {}
        for rel, pairs in json.loads(onto.read_text(encoding="utf-8")).items():
            for pair in pairs:
                for m in pair:
                    if isinstance(m, dict) and m.get("event_mention"):
                        seen.setdefault(m["event_mention"], None)
        return list(seen)[:n], str(onto)
    fn = shared / "framenet17" / "fulltext_opensesame_train.jsonl"
    if fn.exists():
        seen = {}
        with fn.open(encoding="utf-8") as f:
            for line in f:
                seen.setdefault(json.loads(line)["text"], None)
                if len(seen) >= n:
                    break
        return list(seen), str(fn)
    texts: list[str] = []
    for p in sorted(config.samples_dir().rglob("*")):
        if p.is_file() and p.suffix in (".txt", ".jsonl", ".json"):
            texts += [t.strip() for t in p.read_text(encoding="utf-8", errors="replace").splitlines() if len(t.strip()) > 20]
    if not texts:
        raise SystemExit("no sentences found (need ../shared/data or datasets/samples)")
    return (texts * (n // len(texts) + 1))[:n], str(config.samples_dir())


def _autocast(precision: str, device: str):
    if precision == "bf16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--block", type=int, default=500, help="sentences per alternation block (0: whole list)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "encode.json"))
    args = ap.parse_args()

    from sentence_transformers import SentenceTransformer

    load_start = os.getloadavg()  # other jobs share the CPU: record the contention
    sents, source = load_sentences(args.n)
    precisions = ["fp32"] + (["bf16"] if bf16_supported(args.device) else [])
    st = SentenceTransformer(resolve_model(None), device=args.device)
    st.eval()
    runs = []
    for prec in precisions:
        enc = Encoder(None, device=args.device, precision=prec, batch_size=args.batch_size, progress=False)

        def st_encode(xs):
            with _autocast(prec, args.device):
                return st.encode(xs, batch_size=args.batch_size, normalize_embeddings=False, convert_to_numpy=True, show_progress_bar=False)

        sides = {"ours": enc.encode_sentences, "st": st_encode}
        # warm-up (oneDNN primitive creation, allocator) on a slice for both
        for fn in sides.values():
            fn(sents[: args.batch_size * 2])
        # The CPU is shared with other jobs, so the two sides alternate block by block (order
        # flipped every block) and the load hits both alike; each side sorts within a block.
        block = args.block or len(sents)
        blocks = [sents[i : i + block] for i in range(0, len(sents), block)]
        times = {"ours": [], "st": []}
        paired: list[float] = []  # st/ours per block: neighbours in time share the background load
        outs: dict[str, list[np.ndarray]] = {}
        for r in range(args.repeats):
            acc = {"ours": 0.0, "st": 0.0}
            outs = {"ours": [], "st": []}
            for b, xs in enumerate(blocks):
                dt = {}
                for name in (("ours", "st") if (r + b) % 2 == 0 else ("st", "ours")):
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    X = sides[name](xs)
                    if args.device.startswith("cuda"):
                        torch.cuda.synchronize()
                    dt[name] = time.perf_counter() - t0
                    acc[name] += dt[name]
                    outs[name].append(X)
                paired.append(dt["st"] / dt["ours"])
            for name in acc:
                times[name].append(acc[name])
        t_ours, t_st = times["ours"], times["st"]
        X_ours, X_st = np.concatenate(outs["ours"]), np.concatenate(outs["st"])
        cos = (X_ours * X_st).sum(1) / np.linalg.norm(X_ours, axis=1) / np.linalg.norm(X_st, axis=1)
        best_o, best_s = min(t_ours), min(t_st)
        row = {
            "precision": prec,
            "ours_s": t_ours,
            "st_s": t_st,
            "ours_sent_per_s": len(sents) / best_o,
            "st_sent_per_s": len(sents) / best_s,
            "ratio_ours_over_st": best_s / best_o,
            "paired_block_ratios": paired,
            "paired_ratio_median": float(np.median(paired)),
            "cosine_min": float(cos.min()),
            "cosine_mean": float(cos.mean()),
        }
        runs.append(row)
        print(
            f"{prec}: ours {row['ours_sent_per_s']:.1f} sent/s, sentence-transformers {row['st_sent_per_s']:.1f} sent/s, "
            f"ratio {row['ratio_ours_over_st']:.3f}x, paired block median {row['paired_ratio_median']:.3f}x (times ours {[round(t, 2) for t in t_ours]}, st {[round(t, 2) for t in t_st]}); "
            f"cosine min {row['cosine_min']:.6f}",
            flush=True,
        )
    if len(runs) == 2:
        print(f"bf16 vs fp32 (ours): {runs[1]['ours_sent_per_s'] / runs[0]['ours_sent_per_s']:.3f}x")
    tok = Encoder(None, device="cpu", precision="fp32", progress=False).tokenizer
    lens = [len(x) for x in tok(sents, truncation=True, max_length=256)["input_ids"]]
    result = {
        "benchmark": "encode_sentences vs SentenceTransformer.encode",
        "model": "all-MiniLM-L6-v2 (packaged)",
        "source": source,
        "n_sentences": len(sents),
        "tokens_mean": float(np.mean(lens)),
        "tokens_max": int(np.max(lens)),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "block": args.block,
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "loadavg_at_start": load_start,
        "loadavg_at_end": os.getloadavg(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": runs,
    }
    atomic_write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
