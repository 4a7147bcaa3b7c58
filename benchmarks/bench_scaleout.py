"""Benchmark: a CPU-bound train-all grid on 1 vs 2 single-threaded Dask workers, in one run.

    python benchmarks/bench_scaleout.py [--seeds 0,...,7] [--max-mentions 200] [--hidden 768] [--layers 12] \\
        [--out benchmarks/results/bench_scaleout.json]

The grid is the untuned method on the shared MAVEN subset (``../shared/data/maven/subset``; ``--dataset DIR``
names another ingested dataset, ``--samples`` forces the four shipped samples) x 8 seeds, run through the
pipelines' Prefect-free Dask engine (what ``train-all --runner dask:...`` uses without a Prefect API). Each cell
clusters a seeded subsample of ``--max-mentions`` mentions of every type (``k_seen: 0``) in two
representations, embedded with a random BERT of BERT-base shape (no download) into its own embedding cache (the
seeds would otherwise share one dataset's embeddings), so a cell is CPU-bound encoding on one thread plus
clustering. ``cell_s_sum`` is the summed in-cell time (run records' started/finished); the benchmark refuses
to report a ratio when in-cell time is under ``--min-cell-share`` (default 0.8) of the 1-worker wall time,
because the ratio would then measure orchestration, not work (the shipped samples, 4-20 mentions a cell, fail
it). Each arm starts a local Dask cluster of N worker processes with one thread each, lets the workers import
the libraries (as on a running cluster), then times the grid with every cell pinned to one thread; the wall
time includes publishing each run as it finishes. The cluster start is reported apart. A warm-up (one small
cell, in this process) fills the OS file cache first. The two arms must publish identical metric values.
Speed-up = wall(1 worker) / wall(2 workers).

``--scan-mb 100`` instead times the Wikidata dump scan (``scan_dump`` in 2 shards through the cluster's
executor) over the synthetic dump of ``bench_wiki.py``, 1 vs 2 single-threaded Dask workers. ``--smoke`` runs
that scan over a 0.3 MB dump.

Recorded as a benchmark run (``eventatlas.store.benchmarking``: run record, published to the warehouse; the grid's
own runs land in a scratch warehouse under the data root, removed afterwards).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATASETS = ["ontoevent_maven_sample", "maven_sample", "framenet_fulltext_sample", "ace2005_sample"]


def _tiny_bert(out: Path, texts: list[str], hidden: int, layers: int) -> Path:
    import re

    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=5 + len(words), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=4 * hidden, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _warm() -> None:
    import sklearn.cluster  # noqa: F401
    import transformers  # noqa: F401

    import eventatlas.methods.untuned  # noqa: F401
    import eventatlas.pipelines.engine  # noqa: F401


def bench_scan(mb: float, tmp: Path) -> dict:
    """The Wikidata dump scan (``scan_dump``, 2 shards) on 1 vs 2 single-threaded Dask workers, over the
    synthetic dump of ``bench_wiki.py`` (``--scan-mb`` MB): the same events must be found."""
    from distributed import Client, LocalCluster

    import bench_wiki as B
    from eventatlas.wiki import wikidata as W

    path = Path(tmp) / "synthetic-all.json"
    n, n_ev = B.write_synthetic(path, mb, 0)
    size_mb = path.stat().st_size / 1e6
    res: dict = {"dump_mb": round(size_mb, 1), "entities": n, "events_generated": n_ev, "shards": 2, "arms": {}}
    found = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
                Client(c) as client:
            client.run(B._warm, 0)
            t = time.perf_counter()
            r = W.scan_dump(path, B.LANGS, workers=2, executor=client.get_executor())
            dt = time.perf_counter() - t
        found[workers] = sorted(e["qid"] for e in r.events)
        res["arms"][f"{workers}_worker"] = {"wall_s": round(dt, 2), "mb_s": round(size_mb / dt, 1)}
        print(f"scan on {workers} worker(s): {dt:.1f} s", flush=True)
    res["speedup_2_vs_1"] = round(res["arms"]["1_worker"]["wall_s"] / res["arms"]["2_worker"]["wall_s"], 2)
    res["same_events"] = found[1] == found[2] and len(found[1]) == n_ev
    path.unlink()
    print(json.dumps(res, indent=1))
    if not res["same_events"]:
        raise SystemExit("1 and 2 workers found different events: the timing compares different work")
    return res


def main(argv: list[str] | None = None) -> None:
    import shutil

    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dataset", default=None, help="an ingested dataset directory (e.g. <data>/datasets/"
                    "ontoevent_maven): the grid is it x --seeds instead of the four samples")
    ap.add_argument("--max-mentions", type=int, default=200)
    ap.add_argument("--samples", action="store_true", help="the four shipped samples x --seeds even when the "
                    "shared MAVEN subset is there (cells too small to measure: the guard refuses the ratio)")
    ap.add_argument("--min-cell-share", type=float, default=0.8, help="in-cell time / 1-worker wall below this: "
                    "no ratio is reported (it would measure orchestration)")
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    ap.add_argument("--scan-mb", type=float, default=None, help="instead of the grid: the dump scan over a "
                    "synthetic dump of this many MB, 1 vs 2 Dask workers")
    args = benchmarking.parse_args(ap, argv, smoke={"scan_mb": 0.3})
    bench = benchmarking.Benchmark("scaleout", args, libraries=("distributed",))
    root = benchmarking.scratch_dir(args, bench.run_id)
    if args.scan_mb:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        try:
            res = bench_scan(args.scan_mb, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        a1, a2 = res["arms"]["1_worker"], res["arms"]["2_worker"]
        bench.finish([benchmarking.case("s", a2["wall_s"], a1["wall_s"], higher_is_better=False,
                                        setting=f"dump scan {args.scan_mb:g} MB", ours_label="2 Dask workers x 1 thread",
                                        baseline_label="1 Dask worker x 1 thread")], res, out=args.out)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    saved = {k: os.environ.get(k) for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE", "EVENTATLAS_CACHE", "PREFECT_HOME")}
    os.environ.update(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
                      PREFECT_HOME=str(root / "prefect"), EVENTATLAS_CACHE=str(root / "cache-warmup"),
                      PREFECT_SERVER_ANALYTICS_ENABLED="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                      TOKENIZERS_PARALLELISM="false", PREFECT_LOGGING_LEVEL="WARNING")
    import pyarrow.parquet as pq

    from eventatlas.data.ingest import ingest_samples
    from eventatlas.pipelines.local import engine
    from eventatlas.pipelines.train_grid import train_all
    from eventatlas.store.warehouse import Warehouse

    from eventatlas import config
    from eventatlas.pipelines.train_grid import jobs_of

    maven = config.shared_data() / "maven" / "subset" / "maven_subset_a.json"
    if args.dataset:  # a copy under the benchmark's data root (the grid plans from ingested datasets)
        from eventatlas.data import Manifest

        src = Path(args.dataset)
        datasets = [Manifest.read(src).dataset]
        shutil.copytree(src, config.datasets_dir() / datasets[0])
        manifests = [{"path": str(config.datasets_dir() / datasets[0])}]
    elif maven.exists() and not args.samples:  # real MAVEN sentences: cells of --max-mentions mentions each
        from eventatlas.data.ingest import ingest

        manifests = [ingest("maven_sentences", maven, out_dir=config.datasets_dir() / "maven_subset",
                            dataset="maven_subset", progress=False)]
        manifests[0]["path"] = str(config.datasets_dir() / "maven_subset")
        datasets = ["maven_subset"]
    else:  # the shipped samples: 4-20 mentions a cell, too small for the ratio to measure work (the guard says so)
        manifests = [m for m in ingest_samples() if m["dataset"] in DATASETS]
        datasets = DATASETS
    texts = [s for m in manifests
             for s in pq.read_table(Path(m["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()]
    model = _tiny_bert(root / "bert", texts, args.hidden, args.layers)
    # k_seen 0: every type is clustered (the default holds out the 10 most frequent types, which leaves two
    # mentions of a shipped sample); --max-mentions caps a cell with a seeded subsample
    params = {"untuned": {"model_id": str(model), "encoder": {"batch_size": 16, "precision": "fp32"}, "k_seen": 0,
                          "representations": ["trigger", "sentence"], "clusterings": ["agglomerative", "manifold"],
                          "max_mentions": args.max_mentions, "projection": "none"}}
    warm = {"untuned": {**params["untuned"], "max_mentions": 8}}
    quiet = lambda _m: None  # noqa: E731
    train_all(datasets=datasets[:1], seeds=seeds[:1], params=warm, engine=engine(say=quiet))  # imports, files

    from distributed import Client, LocalCluster

    arms, values = {}, {}
    for n in (1, 2):
        # each cell its own embedding cache: the seeds of a dataset would otherwise share its embeddings and
        # all but the first cell of each dataset would only cluster (the grid is the executor's load)
        jobs = jobs_of(["untuned"], datasets, seeds, params, "cpu", False)
        for job in jobs:
            job["params"] = {**job["params"], "cache_dir": str(root / f"cache-{n}" / f"{job['dataset']}-{job['seed']}")}
        t_start = time.perf_counter()
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(_warm)  # an existing cluster's workers have their imports done
            started = time.perf_counter() - t_start
            t0 = time.perf_counter()
            grid = engine(f"dask:{cluster.scheduler_address}", say=quiet).grid(jobs)
            wall = time.perf_counter() - t0
        ids = ",".join(f"'{Path(r).parent.name}'" for r in grid.records)
        rows = Warehouse().query(f"SELECT dataset, seed, representation, clustering, metric, value FROM metrics "
                                 f"WHERE run_id IN ({ids}) ORDER BY ALL")
        values[n] = rows.to_dict("records")
        cell = Warehouse().query(f"SELECT epoch(finished_at - started_at) AS s FROM runs WHERE run_id IN ({ids})").s
        arms[f"{n}_worker"] = {"wall_s": round(wall, 2), "cluster_start_s": round(started, 2),
                               "cells": len(grid.records), "failed": len(grid.failed),
                               "cell_s_sum": round(float(cell.sum()), 2), "cell_s_max": round(float(cell.max()), 2)}
        print(f"{n} worker(s) x 1 thread: {len(grid.records)} cells in {wall:.1f} s (cluster start {started:.1f} s)",
              flush=True)
    result = {"grid": {"method": "untuned", "datasets": datasets, "seeds": seeds, "cells": len(datasets) * len(seeds),
                       "params": {k: v for k, v in params["untuned"].items() if k != "model_id"},
                       "model": f"random BERT, {args.layers} layers, hidden {args.hidden}"},
              "cpu_count": os.cpu_count(), "arms": arms,
              "speedup_2_vs_1": round(arms["1_worker"]["wall_s"] / arms["2_worker"]["wall_s"], 2),
              "identical_metrics": values[1] == values[2], "metric_rows": len(values[1])}
    result["cell_share_1_worker"] = round(arms["1_worker"]["cell_s_sum"] / arms["1_worker"]["wall_s"], 3)
    print(json.dumps(result, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    for k, v in saved.items():  # the grid ran in its own scratch data root and warehouse
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if not result["identical_metrics"]:
        raise SystemExit("1 and 2 workers published different metric values: the timing compares different work")
    if result["cell_share_1_worker"] < args.min_cell_share:
        raise SystemExit(f"in-cell time is {result['cell_share_1_worker']:.0%} of the 1-worker wall time (under "
                         f"{args.min_cell_share:.0%}): the cells are too small for the ratio to measure work; "
                         "raise --max-mentions / --layers or pass a larger --dataset")
    a1, a2 = arms["1_worker"], arms["2_worker"]
    bench.finish([benchmarking.case("s", a2["wall_s"], a1["wall_s"], higher_is_better=False,
                                    setting=f"untuned grid, {len(datasets) * len(seeds)} cells",
                                    ours_label="2 Dask workers x 1 thread", baseline_label="1 Dask worker x 1 thread")],
                 result, out=args.out)


if __name__ == "__main__":
    main()
