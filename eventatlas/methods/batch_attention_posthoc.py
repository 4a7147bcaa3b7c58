"""Background protocol on a shared CPU: train now, evaluate + publish later.

``python -m eventatlas.methods.batch_attention_posthoc train DATASET_DIR OUT_DIR --rep trigger --seed 0 [--epochs 6
--steps 120]`` trains one (representation, seed) with the Trainer (what ``method.run`` does first);
``python -m eventatlas.methods.batch_attention_posthoc evaluate DATASET_DIR RUN_DIR...`` runs the same
evaluation as ``method.run`` on each finished directory, writes a run record (``run.json`` +
``metrics.parquet``, like tasks/train.py), adds the ensemble of all given runs per representation
(its record under ``<data>/runs/``), prints mean +- std over seeds and the record paths.
``eventatlas publish PATH...`` lands the records in the warehouse (the publish path is its one writer).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..io import atomic_write_json


def _train(a) -> None:
    from ..data import Manifest, protocol_for
    from ..device import resolve_device
    from .batch_attention import NAME, BatchAttentionConfig, select_mentions, train_representation
    from .spec import merge_defaults

    man = Manifest.read(a.dataset_dir)
    params = json.loads(a.params) if a.params else {}
    train = {"epochs": a.epochs, "batch_size": a.batch_size, "threads": a.threads, **params.pop("train", {})}
    if a.steps:
        train["max_steps_per_epoch"] = a.steps
    if a.k_seen:
        params["k_seen"] = a.k_seen
    cfg = merge_defaults(BatchAttentionConfig(train=train, **params), protocol_for(man, NAME, "induction"))
    sel = select_mentions(a.dataset_dir, cfg, a.seed)
    s, _ = train_representation(sel, cfg, a.rep, Path(a.out_dir), seed=a.seed, device=resolve_device(cfg.device),
                                type_texts=man.type_texts(), resume=a.resume)
    print(json.dumps({k: s[k] for k in ("chosen_epoch", "total_seconds", "augmentation", "precision")}))


def _ensemble_rows(dataset_dir: str, dataset: str, rep: str, summaries: list[dict]) -> list[dict]:
    """The ensemble clustered with the members' cluster count and manifold neighbour count (their config,
    else the dataset protocol's), as :func:`~eventatlas.methods.batch_attention.evaluate_saved` does."""
    from ..data import Manifest, protocol_for
    from ..induction.evaluate import ensemble_rows
    from .batch_attention import NAME, BatchAttentionConfig, cluster_settings

    proto = protocol_for(Manifest.read(dataset_dir), NAME, "induction")
    settings = {json.dumps(cluster_settings(BatchAttentionConfig.model_validate(s["config"]), proto), sort_keys=True)
                for s in summaries}
    if len(settings) != 1:
        raise ValueError(f"ensemble members were evaluated with different cluster settings: {sorted(settings)}")
    ctx = {"dataset": dataset, "method": "batch_attention", "seed": -1, "split": "unseen",
           "setting": summaries[0].get("setting"), "representation": rep}
    return ensemble_rows(summaries, ctx, **json.loads(settings.pop()))


def _evaluate(a) -> None:
    from .. import config
    from ..records import attach_train_logs, data_fingerprint, finish_record, new_record, write_metrics, write_record
    from ..runinfo import new_run_id
    from .batch_attention import evaluate_saved

    all_rows: list[dict] = []
    by_rep: dict[str, list[dict]] = defaultdict(list)
    records: list[Path] = []
    dataset = None
    for rd in map(Path, a.run_dirs):
        summary = json.loads((rd / "train_summary.json").read_text())
        seed = int(summary["seed"])
        res = evaluate_saved(rd, a.dataset_dir, seed=seed, framenet_dir=a.framenet_dir, umap_plot=not a.no_umap)
        by_rep[summary["representation"]].append(summary)
        dataset = res.params["dataset"]
        run_id = new_run_id(f"batch_attention-{dataset}-s{seed}")
        rec = new_record(run_id, flow="induction-posthoc", task="train", method="batch_attention",
                         params=res.params, data_fingerprints={dataset: data_fingerprint(a.dataset_dir)}, seed=seed)
        rec["artifacts"] = list(res.artifacts)
        write_metrics(rec, res.metrics, rd)
        attach_train_logs(rec, rd)
        records.append(write_record(rd, finish_record(rec)))
        all_rows += res.metrics
    for rep, sums in by_rep.items():
        if len(sums) > 1:
            rows = _ensemble_rows(a.dataset_dir, dataset, rep, sums)
            all_rows += rows
            run_id = new_run_id(f"batch_attention-ensemble-{rep}")
            rec = new_record(run_id, flow="induction-posthoc", task="ensemble", method="batch_attention",
                             params={"dataset": dataset, "representation": rep,
                                     "members": [s["seed"] for s in sums]}, seed=-1)
            run_dir = config.runs_dir() / run_id
            write_metrics(rec, rows, run_dir)
            records.append(write_record(run_dir, finish_record(rec)))
    out = Path(a.summary_json) if a.summary_json else None
    table = summarize(all_rows)
    if out:
        atomic_write_json(out, {"rows": all_rows, "summary": table})
    for line in format_summary(table):
        print(line)
    print(f"wrote {len(records)} run records; land them in the warehouse with:")
    print("  eventatlas publish " + " ".join(str(p) for p in records))


def summarize(rows: list[dict], metrics=("ari", "nmi", "bcubed_f")) -> dict[str, dict[str, list[float]]]:
    """(representation, clustering) -> metric -> [values over seeds]."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["metric"] in metrics or r["metric"].startswith(("naming_", "linking_", "stop_epoch")):
            label = "/".join(x for x in (r.get("variant"), r.get("clustering")) if x)  # the old combined label
            out[f"{r['representation']}|{label}"][r["metric"]].append(r["value"])
    return {k: dict(v) for k, v in out.items()}


def format_summary(table: dict, metrics=("ari", "nmi", "bcubed_f", "naming_hits@1", "naming_mrr",
                                         "linking_hits@10", "linking_mrr")) -> list[str]:
    lines = ["representation | clustering | n | " + " | ".join(metrics)]
    for key in sorted(table):
        rep, cl = key.split("|")
        vals = table[key]
        n = max(len(v) for v in vals.values())
        cells = []
        for m in metrics:
            v = vals.get(m)
            cells.append("" if not v else f"{100 * np.mean(v):.1f} ± {100 * np.std(v):.1f}")
        lines.append(f"{rep} | {cl} | {n} | " + " | ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO)
    p = argparse.ArgumentParser(prog="python -m eventatlas.methods.batch_attention_posthoc")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("dataset_dir")
    t.add_argument("out_dir")
    t.add_argument("--rep", default="trigger")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--epochs", type=int, default=10)
    t.add_argument("--steps", type=int, default=None, help="steps per epoch (default: a full pass)")
    t.add_argument("--batch-size", type=int, default=10)
    t.add_argument("--k-seen", type=int, default=None)
    t.add_argument("--threads", type=int, default=None)
    t.add_argument("--params", default=None, help="JSON of further BatchAttentionConfig fields (the fixes, "
                   "e.g. '{\"trigger_markers\": true}'); 'train' merges into the training block")
    t.add_argument("--resume", action="store_true", help="continue from the directory's last checkpoint")
    e = sub.add_parser("evaluate")
    e.add_argument("dataset_dir")
    e.add_argument("run_dirs", nargs="+")
    e.add_argument("--framenet-dir", default=None)
    e.add_argument("--publish", action="store_true", help=argparse.SUPPRESS)  # moved to `eventatlas publish`
    e.add_argument("--summary-json", default=None)
    e.add_argument("--no-umap", action="store_true")
    a = p.parse_args(argv)
    if getattr(a, "publish", False):
        p.error("--publish is gone: this command writes run records; publish them with `eventatlas publish PATH...`")
    _train(a) if a.cmd == "train" else _evaluate(a)


if __name__ == "__main__":
    main(sys.argv[1:])
