"""Same rows before and after a refactor: one cheap real-data cell per method family, every metric row to JSON.

For each family (untuned, batch_attention, swcc, emr, frame_dml, grounding) the real public data in the shared
data folder is ingested into a scratch data root (``--work``; EVENTATLAS_DATA / _WAREHOUSE / _CACHE point there),
ONE capped cell runs with :func:`eventatlas.run.runner.run_method` (seed 0, CPU, 1 torch thread), and every metric
row of its run record (run ids and timing rows dropped) plus the run's status go to ``--out``, sorted canonically.
A family marked ``"data": "sample"`` in ``CELLS`` runs on the project's shipped sample instead. Timings (CPU
seconds per ingest and per cell) and which ``eventatlas`` ran go to ``<out>.meta.json``, never compared.

The ``eventatlas`` measured is whichever one imports: the venv's, or a checkout put first on ``PYTHONPATH``
(its path is printed first; the pass exits 1 if any ``eventatlas`` module was loaded from elsewhere, as the
venv's editable install does for a module the checkout lacks).
Only APIs present in old and new checkouts are used (``data.ingest.ingest``, ``data.registry.dataset_entry``,
``run.runner.run_method``, the run-record module's ``read_record`` / ``load_metrics``, ``config.samples_dir``)::

    cd /tmp && PYTHONPATH=/path/to/old-checkout nice -n 5 .venv/bin/python scripts/same_rows.py \\
        --work /tmp/rows_before --out /tmp/rows_before.json
    cd /tmp && nice -n 5 .venv/bin/python scripts/same_rows.py --work /tmp/rows_after --out /tmp/rows_after.json
    .venv/bin/python scripts/same_rows.py --compare /tmp/rows_before.json /tmp/rows_after.json

``--compare A B`` prints per family whether status and rows are identical (exact float equality; NaN equals
NaN) and the first differences. Exit 0: all identical; 1: some differ; 2: identical but some family did not
complete or has no rows (that proves nothing). ``--only FAMILY`` runs a subset (repeatable; a partial file).
``--work`` must be absent or empty (``--clean`` empties it first). ``--smoke``: the same path in seconds (the
untuned cell on the shipped FrameNet full-text sample, in a temporary work dir; its file compared with itself).
A pass costs about 5 minutes (4-5 CPU minutes on one thread): ingest 45 s, cells 10-80 CPU s each.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

KEYS = ("task", "dataset", "split", "setting", "method", "representation", "clustering", "variant", "metric", "value",
        "seed")
TIMING_WORDS = ("second", "elapsed", "wall")  # metric names holding durations (frame_dml: seconds_per_epoch, ...)
DEFAULT_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"  # ../shared/data of the checkout

_TRAIN = {"epochs": 1, "precision": "fp32", "threads": 1, "checkpoints": False, "plot": False}

# One cell per family: the registry name to ingest (``ingest``; ``also``: more datasets the cell reads), the
# method's params (caps keep each cell to a CPU minute or two on one thread).
CELLS = [
    {"family": "untuned", "method": "untuned", "ingest": "maven_sentences", "data": "real",
     # the registry's MAVEN 147/18 protocol; 800 of the 2,130 unseen mentions
     "params": {"representations": ["trigger"], "clusterings": ["agglomerative", "manifold"], "max_mentions": 800,
                "projection": "none", "precision": "fp32", "encoder": {"precision": "fp32", "batch_size": 32},
                "save_model": False}},
    {"family": "batch_attention", "method": "batch_attention", "ingest": "maven_sentences", "data": "real",
     "params": {"representations": ["trigger"], "max_mentions": 400, "max_train_mentions": 400, "naming": False,
                "linking": False, "pseudo_k": 0, "augmentation": "word_dropout",
                "algorithms": ["agglomerative", "manifold"], "inputs": ["attn_dot", "ft", "attn_dot_norm"],
                "umap_plot": False, "precision": "fp32",
                "save_model": False,
                "train": {**_TRAIN, "max_steps_per_epoch": 8, "batch_size": 8}}},
    {"family": "emr", "method": "emr", "ingest": "maven_sentences", "data": "real",
     "params": {"max_types": 6, "n_corpus": 10, "n_query": 5, "n_dev": 0, "n_none": 100, "queries_per_type": 2,
                "ks": [2, 5], "repetitions": 1, "models": ["adhoc", "siamese"], "precision": "fp32",
                "encoder": {"precision": "fp32", "batch_size": 32}, "save_model": False,
                "siamese": {"epochs": 2, "hidden": 16, "negatives": 8, "batch_size": 5}}},
    {"family": "swcc", "method": "swcc", "ingest": "event_tuples", "also": ["hard_similarity", "mcnc"], "data": "real",
     # 1,500 of the 15,049 NYT events; scored on hard similarity (test) and cMCNC dev (the dev set)
     "params": {"variant": "swcc", "max_events": 1500, "max_length": 16, "n_prototypes": 3, "plot_events": 20,
                "eval_datasets": ["hard_similarity", "mcnc"], "dev_datasets": ["mcnc"], "precision": "fp32",
                "save_model": False, "train": {**_TRAIN, "max_steps_per_epoch": 10, "batch_size": 16, "lr": 1e-4}}},
    {"family": "frame_dml", "method": "frame_dml", "ingest": "framenet_jsonl", "data": "real",
     # FN 1.7 full text (train file), fold 0 of the verb split
     "params": {"folds": [0], "losses": ["vanilla", "adacos"], "train_cap_per_lu": 1, "max_dev": 200,
                "max_test": 400, "projection": False, "precision": "fp32", "save_model": False,
                "train": {**_TRAIN, "max_steps_per_epoch": 5, "batch_size": 8}}},
    {"family": "grounding", "method": "grounding", "ingest": "framenet_grounding", "data": "real",
     "params": {"variants": ["untuned", "baseline", "multilabel"], "max_train_mentions": 64, "max_eval_mentions": 80,
                "score": "cosine", "negatives": 4, "select_on_dev": False, "ks": [1, 4], "mention_pool": "trigger",
                "keep_models": False, "precision": "fp32", "save_model": False,
                "train": {**_TRAIN, "max_steps_per_epoch": 4, "batch_size": 8}}},
]
FAMILIES = [c["family"] for c in CELLS]
SMOKE_CELLS = [
    {"family": "untuned", "method": "untuned", "ingest": "framenet_jsonl", "data": "sample",
     "params": {"representations": ["trigger"], "clusterings": ["agglomerative"], "projection": "none",
                "precision": "fp32", "encoder": {"precision": "fp32", "batch_size": 8}, "save_model": False}},
]


@contextmanager
def _environ(updates: dict[str, str]):
    """``os.environ`` with ``updates``, restored afterwards (a run may share its process, e.g. the smoke test)."""
    saved = dict(os.environ)
    os.environ.update(updates)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _records():
    """The run-record module (``read_record``, ``load_metrics``): ``eventatlas.tracking.records`` in newer checkouts,
    ``eventatlas.results.records`` before the move. Chosen by the file in the imported package, not by trying the
    import: an editable install's finder would serve a submodule the checkout lacks from the installed tree. The
    names are built from parts so that a tree-wide rename of one does not rewrite the other."""
    import importlib

    import eventatlas

    root = Path(eventatlas.__file__).parent
    for package in ("tracking", "results"):
        if (root / package / "records.py").is_file():
            return importlib.import_module(".".join(("eventatlas", package, "records")))
    raise ModuleNotFoundError(f"no run-record module (tracking/records.py or results/records.py) under {root}")


def _foreign_modules() -> list[str]:
    """``eventatlas`` modules loaded from outside the imported package's directory (an editable install's finder
    fills in what a checkout on PYTHONPATH lacks): the pass would not measure that checkout alone."""
    import eventatlas

    root = Path(eventatlas.__file__).resolve().parent
    return sorted(n for n, m in list(sys.modules.items()) if (n == "eventatlas" or n.startswith("eventatlas."))
                  and getattr(m, "__file__", None) and not Path(m.__file__).resolve().is_relative_to(root))


def _sort_key(row: dict) -> str:
    return json.dumps([row.get(k) for k in KEYS if k != "value"] + [repr(row.get("value"))], default=str)


def _rows(record: dict) -> tuple[list[dict], list[str]]:
    rows, dropped = [], set()
    for r in _records().load_metrics(record):
        if any(w in str(r.get("metric", "")).lower() for w in TIMING_WORDS):
            dropped.add(str(r["metric"]))
            continue
        row = {k: r.get(k) for k in KEYS}
        if isinstance(row["value"], int) and not isinstance(row["value"], bool):
            row["value"] = float(row["value"])
        rows.append(row)
    return sorted(rows, key=_sort_key), sorted(dropped)


def _ingest(name: str, data: str, shared: Path, log: dict) -> Path:
    """Ingest registry entry ``name`` (real: the shared data; sample: the shipped sample); its dataset dir."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.data.registry import dataset_entry

    entry = dataset_entry(name)
    key = f"{name}:{data}"
    if key in log:
        return Path(log[key]["path"])
    if data == "real":
        path, dataset = shared / entry["path"], entry["dataset"]
    else:
        path, dataset = config.samples_dir() / entry["sample"], f"{entry['dataset']}_sample"
    c0, w0 = _cpu(), time.perf_counter()
    man = ingest(name, path, out_dir=config.datasets_dir() / dataset, dataset=dataset, progress=False)
    log[key] = {"path": man["path"], "dataset": dataset, "input": str(path), "cpu_s": round(_cpu() - c0, 1),
                "wall_s": round(time.perf_counter() - w0, 1)}
    print(f"  ingested {name} ({data}) -> {dataset}: {log[key]['cpu_s']} CPU s", flush=True)
    return Path(man["path"])


def run(args: argparse.Namespace) -> int:
    if args.smoke:
        args.work = tempfile.mkdtemp(prefix="same_rows_smoke_")
        args.out = str(Path(args.work) / "rows.json")
    work = Path(args.work).resolve()
    if work.exists() and any(work.iterdir()):
        if not args.clean:
            print(f"--work {work} is not empty (give --clean to empty it)", file=sys.stderr)
            return 2
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    shared = Path(args.shared).resolve()
    # set before eventatlas is imported: every path it writes lands in the scratch root
    with _environ({"EVENTATLAS_DATA": str(work / "data"), "EVENTATLAS_WAREHOUSE": str(work / "warehouse.duckdb"),
                   "EVENTATLAS_CACHE": str(work / "cache"), "EVENTATLAS_SHARED_DATA": str(shared),
                   "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}):
        rc = _run_cells(args, work, shared, SMOKE_CELLS if args.smoke else CELLS)
    if args.smoke:
        rc = rc or compare(args.out, args.out)
        print(f"smoke: {'ok' if rc == 0 else 'FAILED'}")
    return rc


def _run_cells(args: argparse.Namespace, work: Path, shared: Path, cells: list[dict]) -> int:
    import eventatlas
    import torch

    torch.set_num_threads(args.threads)  # reduction order follows the thread count: keep it fixed
    from eventatlas.run.runner import run_method

    read_record = _records().read_record

    print(f"eventatlas: {eventatlas.__file__}", flush=True)
    cells = [c for c in cells if not args.only or c["family"] in args.only]
    out: dict = {"families": {}}
    meta: dict = {"eventatlas": eventatlas.__file__, "work": str(work), "shared": str(shared),
                  "threads": args.threads, "ingest": {}, "cells": {}}
    for cell in cells:
        fam, data = cell["family"], cell["data"]
        print(f"{fam}: {cell['method']} on {cell['ingest']} ({data})", flush=True)
        entry: dict = {"method": cell["method"], "data": data, "params": cell["params"]}
        try:
            for extra in cell.get("also", []):
                _ingest(extra, data, shared, meta["ingest"])
            ds_dir = _ingest(cell["ingest"], data, shared, meta["ingest"])
            entry["dataset"] = ds_dir.name
            c0, w0 = _cpu(), time.perf_counter()
            rec = read_record(run_method(cell["method"], ds_dir, seed=0, params=cell["params"], device="cpu"))
            cpu_s, wall_s = _cpu() - c0, time.perf_counter() - w0
            entry["status"] = rec["run"].get("status")
            if rec["run"].get("error"):
                entry["error"] = rec["run"]["error"].replace(str(work), "<work>")
            entry["rows"], dropped = _rows(rec)
            if dropped:
                entry["dropped_timing_metrics"] = dropped
            meta["cells"][fam] = {"cpu_s": round(cpu_s, 1), "wall_s": round(wall_s, 1), "rows": len(entry["rows"]),
                                  "status": entry["status"], "run_dir": str(Path(rec["metrics_path"] or "").parent)}
            print(f"  {entry['status']}: {len(entry['rows'])} rows, {cpu_s:.1f} CPU s, {wall_s:.1f} s wall"
                  + (f"; {entry['error']}" if entry.get("error") else ""), flush=True)
        except Exception as e:  # a family that cannot run is a result too (recorded, compared)
            entry.update(status="error", error=f"{type(e).__name__}: {e}".replace(str(work), "<work>"), rows=[])
            print(f"  error: {entry['error']}", flush=True)
        out["families"][fam] = entry
    meta["foreign_modules"] = foreign = _foreign_modules()
    if foreign:
        print(f"ERROR: eventatlas modules imported from outside {Path(eventatlas.__file__).parent}: {foreign}")
    Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    Path(str(args.out) + ".meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({sum(len(e['rows']) for e in out['families'].values())} rows) and {args.out}.meta.json")
    return 0 if all(e["status"] == "completed" for e in out["families"].values()) and not foreign else 1


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _row_id(row: dict) -> tuple:
    return tuple(json.dumps(row.get(k), default=str) for k in KEYS if k != "value")


def compare(path_a: str, path_b: str, show: int = 5) -> int:
    a = json.loads(Path(path_a).read_text(encoding="utf-8"))["families"]
    b = json.loads(Path(path_b).read_text(encoding="utf-8"))["families"]
    differ, weak = False, False
    for fam in sorted(set(a) | set(b), key=lambda f: (FAMILIES.index(f) if f in FAMILIES else 99, f)):
        if fam not in a or fam not in b:
            print(f"{fam}: DIFFERENT: only in {path_a if fam in a else path_b}")
            differ = True
            continue
        ea, eb = a[fam], b[fam]
        notes = [f"{k}: {ea.get(k)!r} != {eb.get(k)!r}" for k in ("status", "error", "data", "params", "dataset")
                 if ea.get(k) != eb.get(k)]
        ra, rb = ea.get("rows", []), eb.get("rows", [])
        if len(ra) != len(rb):
            notes.append(f"{len(ra)} rows != {len(rb)} rows")
        ia, ib = {}, {}
        for r in ra:
            ia.setdefault(_row_id(r), []).append(r["value"])
        for r in rb:
            ib.setdefault(_row_id(r), []).append(r["value"])
        for k in [k for k in ia if k not in ib]:
            notes.append(f"row only in A: {dict(zip([x for x in KEYS if x != 'value'], map(json.loads, k)))} "
                         f"= {ia[k]}")
        for k in [k for k in ib if k not in ia]:
            notes.append(f"row only in B: {dict(zip([x for x in KEYS if x != 'value'], map(json.loads, k)))} "
                         f"= {ib[k]}")
        for k in [k for k in ia if k in ib]:
            va, vb = sorted(ia[k], key=repr), sorted(ib[k], key=repr)
            if len(va) != len(vb) or not all(_same(x, y) for x, y in zip(va, vb)):
                key = {x: json.loads(v) for x, v in zip([x for x in KEYS if x != "value"], k)}
                notes.append(f"value differs: {key}: {va!r} != {vb!r}")
        if notes:
            differ = True
            print(f"{fam}: DIFFERENT ({len(notes)} differences; first {min(show, len(notes))}):")
            for n in notes[:show]:
                print(f"    {n}")
        else:
            ok = ea.get("status") == "completed" and ra
            weak = weak or not ok
            print(f"{fam}: identical ({len(ra)} rows, status {ea.get('status')}, data {ea.get('data')})"
                  + ("" if ok else "  <- proves nothing: not completed or no rows"))
    return 1 if differ else 2 if weak else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", help="scratch data root (absent or empty; EVENTATLAS_DATA/_WAREHOUSE/_CACHE go here)")
    p.add_argument("--out", help="the rows JSON to write (timings beside it in <out>.meta.json)")
    p.add_argument("--shared", default=str(DEFAULT_SHARED), help="shared data folder (default: %(default)s)")
    p.add_argument("--only", action="append", choices=FAMILIES, help="run only this family (repeatable)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1; keep equal across runs)")
    p.add_argument("--clean", action="store_true", help="empty a non-empty --work first")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two rows files and exit")
    p.add_argument("--smoke", action="store_true", help="one tiny sample cell in a temporary work dir (seconds)")
    args = p.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.smoke and (not args.work or not args.out):
        p.error("--work and --out are required (or --compare A B, or --smoke)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
