"""Benchmark: applying a saved model to new mentions vs the frozen encoder, per saved-model kind.

What ``eventatlas evaluate`` computes before it clusters, for N mentions (default 10,000: the real MAVEN
subset mentions of the shared data, repeated up to N; the shipped MAVEN sample with ``--smoke``):

* ``encoder`` (an encoder-only model, e.g. swcc's, applied by untuned's protocol): trigger vectors from the
  saved encoder;
* ``batch_attention``: the saved encoder's features plus the saved Q/K scorer's queries and keys
  (``embed_fqk``, with the trigger markers the model was trained with);
* ``emr``: the frozen encoder's trigger vectors mapped through the saved meta network;
* ``frame_dml``: the saved fold encoder's word and mask vectors (two passes) mixed with the dev-chosen alpha.

The baseline of every kind is the frozen base encoder's trigger vectors of the same mentions (one pass, no
markers). Figures: mentions/s of the apply step (model already loaded; median of ``--repeats``) and the
model's load time. Models: ``--models kind=run:<id>,...`` measures saved models of this data root; a kind
not named gets a saved model of the right layout built from the base encoder (untrained weights: the same
architecture, so the same cost). One thread by default (``--threads``).

    python benchmarks/bench_apply.py [--n 10000] [--batch-size 64] [--repeats 1] [--threads 1]
                                     [--models batch_attention=run:<id>,frame_dml=run:<id>,encoder=run:<id>]
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

KINDS = ("encoder", "batch_attention", "emr", "frame_dml")


def load_mentions(n: int, samples_only: bool) -> tuple[list[str], list[int], list[int], str]:
    """(sentences, starts, ends, source) of ``n`` mentions: MAVEN-subset-layout JSON (token offsets) made
    into character offsets, repeated up to ``n``."""
    from eventatlas import config

    src = config.shared_data() / "maven" / "subset" / "maven_subset_a.json"
    if samples_only or not src.exists():
        src = config.samples_dir() / "maven_sentences" / "maven_sentences_sample.json"
    sents, starts, ends = [], [], []
    for s in json.loads(src.read_text(encoding="utf-8")):
        toks = s["tokens"]
        offs, pos = [], 0
        for t in toks:
            offs.append(pos)
            pos += len(t) + 1
        text = " ".join(toks)
        for e in s.get("events", []):
            a, b = offs[e["start"]], offs[e["end"] - 1] + len(toks[e["end"] - 1])
            sents.append(text), starts.append(a), ends.append(b)
    if not sents:
        raise SystemExit(f"{src}: no mentions")
    k = n // len(sents) + 1
    return (sents * k)[:n], (starts * k)[:n], (ends * k)[:n], src.name


def build_models(kinds: list[str]) -> dict[str, str]:
    """Saved models of each kind in ``kinds`` written from the base encoder (untrained weights)."""
    from eventatlas import config
    from eventatlas.emr.models import QueryNetworks
    from eventatlas.induction.model import InductionModel
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.saved import ModelWriter, finalize

    refs = {}
    for kind in kinds:
        run_id = f"bench-apply-{kind}-model"
        run_dir = config.runs_dir() / run_id
        if not (run_dir / "model").exists():
            method = {"encoder": "swcc"}.get(kind, kind)
            w = ModelWriter(run_dir, method=method)
            enc = MentionEncoder(None)
            if kind == "encoder":
                w.encoder(enc, name="encoder")
                w.close(representation="sentence")
            elif kind == "batch_attention":
                w.encoder(enc, name="trigger")
                cl = InductionModel(enc).clusterer
                w.head("clusterer_trigger", cl.state_dict(), kind="attention_scorer",
                       config={"dim": cl.d, "dropout": 0.1, "share_layernorm": cl.share_layernorm,
                               "representation": "trigger", "epoch": 0})
                w.close(representation="trigger", epoch=0, inference={"trigger": {"trigger_markers": True}})
            elif kind == "emr":
                d = enc.hidden_size
                net = QueryNetworks(1, d, 768, 3)
                w.head("meta", net.state_dict(), kind="meta_network",
                       config={"d_in": d, "hidden": 768, "layers": 3, "residual": False, "representation": "trigger"})
                w.close(representation="trigger", base_model=enc.model_id)
            else:
                w.encoder(enc, name="fold0")
                w.close(representation="trigger", inference={"fold0": {"loss": "adacos", "alpha_one_step": 0.5}})
            finalize(run_dir, {"run_id": run_id, "method": method, "params": {"config": {}}, "code_version": "bench",
                               "data_fingerprints": {"bench": "-"}, "seed": 0}, [])
        refs[kind] = f"run:{run_id}"
    return refs


def appliers(ref: str, kind: str, batch_size: int):
    """(load function, apply function) of one kind: ``load()`` returns the state ``apply(state, mentions)`` uses."""
    import torch

    from eventatlas.modeling.encode import Encoder
    from eventatlas.modeling.saved import resolve_ref

    def enc_of(path):
        return Encoder(path, device="cpu", precision="fp32", batch_size=batch_size, progress=False)

    if kind == "encoder":
        return (lambda: enc_of(resolve_ref(ref).encoder_path),
                lambda e, s, a, b: e.encode_mentions(s, a, b, "trigger"))
    if kind == "batch_attention":
        from eventatlas.induction.model import InductionModel
        from eventatlas.induction.training import embed_fqk
        from eventatlas.modeling.mention_encoder import MentionEncoder
        from eventatlas.modeling.inputs import mark_triggers

        def load():
            m = resolve_ref(ref)
            rep = m.selected or m.card.encoder
            state, cfg = m.head(f"clusterer_{rep}")
            model = InductionModel(MentionEncoder(m.encoder_path), dropout=cfg.get("dropout", 0.1),
                                   share_layernorm=cfg["share_layernorm"])
            model.clusterer.load_state_dict(state)
            return model, rep, bool(m.card.inference.get(rep, {}).get("trigger_markers"))

        def apply(st, s, a, b):
            model, rep, marked = st
            if marked:
                s, a, b = mark_triggers(s, a, b)
            items = model.encoder.prepare(s, a, b, rep)
            with torch.inference_mode():
                return embed_fqk(model, items, rep, device="cpu", precision="fp32", batch_size=batch_size,
                                 progress="apply batch_attention")
        return load, apply
    if kind == "emr":
        from eventatlas.emr.meta import load_meta

        def load():
            meta = load_meta(ref)
            return enc_of(resolve_ref(ref).card.base_model), meta
        return load, lambda st, s, a, b: st[1].transform(st[0].encode_mentions(s, a, b, "trigger"))
    if kind == "frame_dml":
        from eventatlas.framedml.represent import mix

        def load():
            m = resolve_ref(ref)
            info = m.card.inference.get(m.selected or m.card.encoder, {})
            return enc_of(m.encoder_path), float(info.get("alpha_one_step", 0.5))

        def apply(st, s, a, b):
            e, alpha = st
            return mix(e.encode_mentions(s, a, b, "trigger"), e.encode_mentions(s, a, b, "mask"), alpha)
        return load, apply
    raise SystemExit(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="mentions applied (real ones repeated up to n)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (one core by default)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--models", default="", help="kind=run:<id>,...: saved models of this data root to measure")
    ap.add_argument("--out", type=Path, default=None, help="also write the result JSON here")
    args = benchmarking.parse_args(ap, argv, smoke={"n": 48, "batch_size": 16, "repeats": 1})
    import torch

    torch.set_num_threads(args.threads)
    kinds = [k for k in args.kinds.split(",") if k]
    given = dict(kv.split("=", 1) for kv in args.models.split(",") if kv)
    bad = sorted(set(kinds + list(given)) - set(KINDS))
    if bad:
        raise SystemExit(f"unknown kinds {bad}; known: {', '.join(KINDS)}")
    bench = benchmarking.Benchmark("apply", args)
    sents, starts, ends, source = load_mentions(args.n, args.smoke)
    refs = {**build_models([k for k in kinds if k not in given]), **given}
    from eventatlas.modeling.encode import Encoder

    def base_apply(e, s, a, b):  # the frozen encoder's trigger vectors
        return e.encode_mentions(s, a, b, "trigger")

    def load_base():
        return Encoder(None, device="cpu", precision="fp32", batch_size=args.batch_size, progress=False)

    load_base()  # the first load pays the library imports: both arms' load times are timed warm
    base, t_base_load = timed(load_base)
    base_apply(base, sents[:32], starts[:32], ends[:32])  # warm-up
    cases, result = [], {"n": args.n, "source": source, "threads": args.threads, "models": refs, "kinds": {}}
    for kind in kinds:
        load, apply = appliers(refs[kind], kind, args.batch_size)
        st, t_load = timed(load)
        apply(st, sents[:32], starts[:32], ends[:32])
        ours, frozen = [], []
        for r in range(args.repeats):  # paired, order flipped every repeat
            for arm in (("ours", "frozen") if r % 2 == 0 else ("frozen", "ours")):
                if arm == "ours":
                    ours.append(timed(apply, st, sents, starts, ends)[1])
                else:
                    frozen.append(timed(base_apply, base, sents, starts, ends)[1])
        rate_o, rate_f = args.n / statistics.median(ours), args.n / statistics.median(frozen)
        print(f"{kind} ({refs[kind]}): {rate_o:.1f} mentions/s applied vs {rate_f:.1f} frozen; load {t_load:.2f} s",
              flush=True)
        result["kinds"][kind] = {"ref": refs[kind], "apply_s": ours, "frozen_s": frozen, "load_s": t_load,
                                 "frozen_load_s": t_base_load}
        cases.append(benchmarking.case("mentions_per_s", rate_o, rate_f, higher_is_better=True, setting=kind,
                                       ours_label=f"saved {kind} model", baseline_label="frozen encoder",
                                       ours_samples=[args.n / t for t in ours],
                                       baseline_samples=[args.n / t for t in frozen], precision="fp32"))
        cases.append(benchmarking.case("load_s", t_load, t_base_load, higher_is_better=False, setting=kind,
                                       ours_label=f"saved {kind} model", baseline_label="frozen encoder"))
    bench.finish(cases, result, out=args.out)


if __name__ == "__main__":
    main()
