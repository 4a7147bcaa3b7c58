"""Background protocol on a shared CPU: train now, evaluate + publish later.

``python -m eventatlas.induction.posthoc train DATASET_DIR OUT_DIR --rep trigger --seed 0 [--epochs 6
--steps 120]`` trains one (representation, seed) with the Trainer (what ``method.run`` does first);
``python -m eventatlas.induction.posthoc evaluate DATASET_DIR RUN_DIR... [--publish]`` runs the same
evaluation as ``method.run`` on each finished directory, writes a run record (``run.json`` +
``metrics.parquet``, like tasks/train.py), optionally publishes it to the warehouse, adds the
ensemble of all given runs per representation, and prints mean +- std over seeds.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..io import atomic_write_json, sha256_file, write_parquet


def _train(a) -> None:
    from ..data import Manifest, protocol_for, select_labelled
    from ..device import resolve_device
    from ..methods.batch_attention import NAME, BatchAttentionConfig, train_representation
    from ..methods.spec import merge_defaults

    man = Manifest.read(a.dataset_dir)
    train = {"epochs": a.epochs, "batch_size": a.batch_size, "threads": a.threads}
    if a.steps:
        train["max_steps_per_epoch"] = a.steps
    cfg = merge_defaults(BatchAttentionConfig(train=train, **({"k_seen": a.k_seen} if a.k_seen else {})),
                         protocol_for(man, NAME, "induction"))
    sel = select_labelled(a.dataset_dir, k_seen=cfg.k_seen or 10, lu_pos=cfg.lu_pos, max_eval=cfg.max_mentions,
                          seed=a.seed)
    s, _ = train_representation(sel, cfg, a.rep, Path(a.out_dir), seed=a.seed, device=resolve_device(cfg.device),
                                type_texts=man.type_texts(), resume=a.resume)
    print(json.dumps({k: s[k] for k in ("chosen_epoch", "total_seconds", "augmentation", "precision")}))


def _ensemble_rows(dataset: str, rep: str, summaries: list[dict], n_clusters: int | None) -> list[dict]:
    from .evaluate import ensemble_rows

    ctx = {"dataset": dataset, "method": "batch_attention", "seed": -1, "split": "unseen",
           "setting": summaries[0].get("setting"), "representation": rep}
    return ensemble_rows(summaries, ctx, n_clusters)


def _evaluate(a) -> None:
    from ..runinfo import code_version, device_info, new_run_id, utcnow
    from ..warehouse import Warehouse, metrics_table
    from ..methods.batch_attention import evaluate_saved

    all_rows: list[dict] = []
    by_rep: dict[str, list[dict]] = defaultdict(list)
    records = []
    for rd in map(Path, a.run_dirs):
        summary = json.loads((rd / "train_summary.json").read_text())
        seed = int(summary["seed"])
        res = evaluate_saved(rd, a.dataset_dir, seed=seed, framenet_dir=a.framenet_dir, umap_plot=not a.no_umap)
        by_rep[summary["representation"]].append(summary)
        run_id = new_run_id(f"batch_attention-{res.params['dataset']}-s{seed}")
        mpath = write_parquet(metrics_table(res.metrics, run_id=run_id), rd / "metrics.parquet")
        arts = [*res.artifacts, {"kind": "metrics", "path": str(mpath), "rows": len(res.metrics),
                                 "sha256": sha256_file(mpath)}]
        run = {"run_id": run_id, "flow": "induction-posthoc", "task": "train", "method": "batch_attention",
               "params": res.params, "code_version": code_version(), "data_fingerprints": {},
               "seed": seed, "started_at": utcnow().isoformat(), "finished_at": utcnow().isoformat(),
               "status": "completed", "device": device_info()}
        atomic_write_json(rd / "run.json", {"run": run, "metrics_path": str(mpath), "artifacts": arts})
        records.append((run, res.metrics, arts))
        all_rows += res.metrics
    for rep, sums in by_rep.items():
        if len(sums) > 1:
            rows = _ensemble_rows(records[0][0]["params"]["dataset"], rep, sums, None)
            all_rows += rows
            run_id = new_run_id(f"batch_attention-ensemble-{rep}")
            run = {"run_id": run_id, "flow": "induction-posthoc", "task": "ensemble", "method": "batch_attention",
                   "params": {"representation": rep, "members": [s["seed"] for s in sums]},
                   "code_version": code_version(), "seed": -1, "status": "completed", "device": device_info()}
            records.append((run, rows, []))
    if a.publish:
        wh = Warehouse(a.warehouse)
        wh.migrate()
        for run, rows, arts in records:
            wh.publish(run, rows, arts)
        print(f"published {len(records)} runs to {wh.path if hasattr(wh, 'path') else a.warehouse}")
    out = Path(a.summary_json) if a.summary_json else None
    table = summarize(all_rows)
    if out:
        atomic_write_json(out, {"rows": all_rows, "summary": table})
    for line in format_summary(table):
        print(line)


def summarize(rows: list[dict], metrics=("ari", "nmi", "bcubed_f")) -> dict[str, dict[str, list[float]]]:
    """(representation, clustering) -> metric -> [values over seeds]."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["metric"] in metrics or r["metric"].startswith(("naming_", "linking_", "stop_epoch")):
            out[f"{r['representation']}|{r['clustering']}"][r["metric"]].append(r["value"])
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
    p = argparse.ArgumentParser(prog="python -m eventatlas.induction.posthoc")
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
    t.add_argument("--resume", action="store_true", help="continue from the directory's last checkpoint")
    e = sub.add_parser("evaluate")
    e.add_argument("dataset_dir")
    e.add_argument("run_dirs", nargs="+")
    e.add_argument("--framenet-dir", default=None)
    e.add_argument("--publish", action="store_true")
    e.add_argument("--warehouse", default=None)
    e.add_argument("--summary-json", default=None)
    e.add_argument("--no-umap", action="store_true")
    a = p.parse_args(argv)
    _train(a) if a.cmd == "train" else _evaluate(a)


if __name__ == "__main__":
    main(sys.argv[1:])
