"""Benchmark runs: what a script under ``benchmarks/`` records, so its figures reach the warehouse.

A benchmark measures eventatlas (*ours*) against a baseline in the same run. It is a run like any
other: :func:`record_benchmark` writes ``<runs>/<run_id>/run.json`` (flow and task ``benchmark``,
method = the benchmark's name), the script's full result as ``result.json`` and one row per compared
quantity as ``benchmarks.parquet`` (:data:`BENCHMARK_SCHEMA`: both arms, the ratio, the machine), and
the publish path lands it in the warehouse table ``benchmarks`` (migration 008). The report shows
the latest ratio per benchmark and its history over code versions.

Every script takes the same options (:func:`add_arguments`): ``--smoke`` (tiny input, seconds, no
file in the repository and never the user's warehouse: a temporary data root unless ``--data-root``
names one), ``--no-publish`` (write the record only) and ``--data-root``. No Prefect here.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa

from ..io import atomic_write_json, sha256_file, write_parquet
from ..schema import BENCHMARKS
from ..tracking.records import finish_record, new_record, write_record
from ..tracking.runinfo import new_run_id

BENCHMARKS_FILE = "benchmarks.parquet"
RESULT_FILE = "result.json"
# libraries whose versions a benchmark row records (those installed; a benchmark may add its own)
VERSIONED = ("torch", "transformers", "sentence-transformers", "numpy", "faiss-cpu", "scikit-learn", "fastcluster",
             "duckdb", "pyarrow", "orjson", "ijson", "dask", "prefect")

BENCHMARK_SCHEMA = BENCHMARKS  # eventatlas.schema: the warehouse table of migration 008 minus run_id


def add_arguments(ap: argparse.ArgumentParser, publish: bool = True) -> argparse.ArgumentParser:
    """The options every benchmark shares; ``publish=False`` for a script that records no run (a
    diagnostic): ``--smoke`` and ``--data-root`` only."""
    ap.add_argument("--smoke", action="store_true",
                    help="tiny input, a few seconds: checks the script runs (nothing written into the repository; "
                         "a temporary data root and warehouse unless --data-root is given)")
    if publish:
        ap.add_argument("--publish", action=argparse.BooleanOptionalAction, default=True,
                        help="land the run record in the warehouse (default); --no-publish writes the record only")
    ap.add_argument("--data-root", type=Path, default=None,
                    help="data root for the script's files (runs/<run_id>, scratch/) and, with --smoke, its warehouse")
    return ap


def parse_args(ap: argparse.ArgumentParser, argv: Sequence[str] | None = None, *, publish: bool = True,
               smoke: Mapping[str, Any] | None = None) -> argparse.Namespace:
    """Add the shared options (:func:`add_arguments`), parse, apply ``smoke`` (option -> value: the tiny
    sizes of a ``--smoke`` run) and :func:`prepare` the data root."""
    args = add_arguments(ap, publish).parse_args(argv)
    if args.smoke:
        for k, v in (smoke or {}).items():
            setattr(args, k, v)
    prepare(args)
    return args


def prepare(args: argparse.Namespace) -> Path | None:
    """Point the data root (and, for a smoke run, the warehouse and cache) at ``--data-root`` or, for a smoke
    run without one, at a new temporary directory, so a smoke run never touches the user's data or
    warehouse. Call before anything reads :mod:`eventatlas.config`. Returns the data root set, if any."""
    root = getattr(args, "data_root", None)
    if root is None and getattr(args, "smoke", False):
        root = Path(tempfile.mkdtemp(prefix="eventatlas-smoke-"))
    if root is None:
        return None
    root = Path(root).resolve()
    from .. import config

    smoke = getattr(args, "smoke", False)
    config.switch(data_root=root, **({"warehouse": root / "warehouse.duckdb", "cache": root / "cache"} if smoke else {}))
    args.data_root = root
    return root


def scratch_dir(args: argparse.Namespace, name: str) -> Path:
    """A work directory for a script's own files: under the data root (a temporary one for a smoke run)."""
    from .. import config

    d = (Path(args.data_root) if getattr(args, "data_root", None) else config.data_root()) / "scratch" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def machine(device: str = "cpu") -> dict[str, Any]:
    """CPU model, GPU model (None without one), torch threads, load: what a benchmark row records."""
    from ..modeling.device import cpu_name

    gpu, threads = None, os.cpu_count()
    if "torch" in sys.modules:  # a benchmark that never loaded torch is described without it
        import torch

        threads = torch.get_num_threads()
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    return {"device": device, "cpu_model": cpu_name(), "gpu_model": gpu, "threads": threads,
            "loadavg": os.getloadavg()[0]}


def versions(extra: Iterable[str] = ()) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in (*VERSIONED, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def ratio(ours: float | None, baseline: float | None, higher_is_better: bool) -> float | None:
    """How many times better ours is (> 1: better), whatever the quantity's direction."""
    if ours is None or baseline is None or not ours or not baseline:
        return None
    return float(ours) / float(baseline) if higher_is_better else float(baseline) / float(ours)


def case(quantity: str, ours: float | None, baseline: float | None, *, higher_is_better: bool,
         setting: str | None = None, ours_label: str = "eventatlas", baseline_label: str = "baseline",
         ours_samples: Sequence[float] = (), baseline_samples: Sequence[float] = (),
         precision: str | None = None) -> dict[str, Any]:
    """One compared quantity of a benchmark (a row of :data:`BENCHMARK_SCHEMA` before the machine is added)."""
    return {"setting": setting, "quantity": quantity, "higher_is_better": bool(higher_is_better),
            "ours_label": ours_label, "baseline_label": baseline_label,
            "ours": None if ours is None else float(ours), "baseline": None if baseline is None else float(baseline),
            "ratio": ratio(ours, baseline, higher_is_better),
            "ours_samples": [float(x) for x in ours_samples], "baseline_samples": [float(x) for x in baseline_samples],
            "precision": precision}


class Benchmark:
    """One benchmark run: create it before measuring (start time, load), :meth:`finish` after.

    ``finish`` writes the run record (and publishes it unless ``--no-publish``) and returns the
    record's path; ``result`` is the script's full result (saved as ``result.json``)."""

    def __init__(self, name: str, args: argparse.Namespace, *, device: str = "cpu", libraries: Iterable[str] = ()):
        from ..tracking.runinfo import utcnow

        self.name, self.args, self.device, self.libraries = name, args, device, tuple(libraries)
        self.smoke = bool(getattr(args, "smoke", False))
        self.run_id = new_run_id(f"bench-{name}")
        self.started_at = utcnow().isoformat()
        self.load_start = os.getloadavg()[0]

    def rows(self, cases: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        m = machine(self.device)
        vers = json.dumps(versions(self.libraries), sort_keys=True)
        return [{"benchmark": self.name, **dict(c), "device": m["device"], "cpu_model": m["cpu_model"],
                 "gpu_model": m["gpu_model"], "threads": m["threads"], "loadavg_start": self.load_start,
                 "loadavg_end": m["loadavg"], "versions": vers, "smoke": self.smoke} for c in cases]

    def finish(self, cases: Iterable[Mapping[str, Any]], result: Mapping[str, Any], *,
               out: str | os.PathLike | None = None, params: Mapping[str, Any] | None = None) -> Path:
        from .. import config
        from ..modeling.device import describe

        run_dir = config.runs_dir() / self.run_id
        params = dict(params if params is not None else _plain(vars(self.args)))
        record = new_record(self.run_id, flow="benchmark", task="benchmark", method=self.name, params=params,
                            started_at=self.started_at,
                            device=describe(self.device) if "torch" in sys.modules else None)
        if record["run"]["device"] is None:
            record["run"]["device"] = f"cpu ({machine()['cpu_model']}, {os.cpu_count()} threads)"
        rows = self.rows(cases)
        table = pa.Table.from_pylist(rows, schema=BENCHMARK_SCHEMA)
        bpath = write_parquet(table, run_dir / BENCHMARKS_FILE)
        rpath = run_dir / RESULT_FILE
        atomic_write_json(rpath, {"run_id": self.run_id, **dict(result)})
        record["benchmarks_path"] = str(bpath)
        record["artifacts"] = [
            {"kind": "benchmark/rows", "path": str(bpath), "rows": table.num_rows, "sha256": sha256_file(bpath)},
            {"kind": "benchmark/result", "path": str(rpath), "rows": None, "sha256": sha256_file(rpath)}]
        if out:
            atomic_write_json(out, {"run_id": self.run_id, **dict(result)})
        path = write_record(run_dir, finish_record(record))
        for r in rows:
            print(format_row(r), flush=True)
        print(f"run record: {path}", flush=True)
        if getattr(self.args, "publish", True):
            from .publishing import publish_records

            outcome = publish_records([path])
            state = "queued (warehouse busy)" if outcome.queued else "published"
            print(f"{state}: {self.run_id} -> {outcome.warehouse}", flush=True)
        return path


def format_row(r: Mapping[str, Any]) -> str:
    """One line per compared quantity, as the scripts print it."""
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.4g}"

    return (f"{r['benchmark']}{'/' + r['setting'] if r.get('setting') else ''} {r['quantity']}: "
            f"{r.get('ours_label') or 'ours'} {f(r['ours'])}, {r.get('baseline_label') or 'baseline'} "
            f"{f(r['baseline'])}, ratio {f(r['ratio'])}x ({'higher' if r['higher_is_better'] else 'lower'} is better)")


def _plain(d: Mapping[str, Any]) -> dict[str, Any]:
    """argparse values as JSON-able params."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()
            if isinstance(v, (str, int, float, bool, type(None), Path, list, tuple))}
