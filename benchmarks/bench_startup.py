"""Start-up cost of a one-shot command: `eventatlas ingest` of a small sample, the old way (through
the `ingest` flow, which starts a temporary Prefect server when no API is configured:
``EVENTATLAS_PREFECT=always``) against the new default with no Prefect API (the core directly,
recorded through the same publish path: ``EVENTATLAS_PREFECT=auto``), measured in one run,
interleaved, each a fresh process as a user runs it. Also times the work itself in-process (the
core ingest + run record + publish, imports already paid) so the overhead is visible.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 3] [--sample datasets/samples/maven/train.jsonl] [--smoke]

Every measured command must land its run record in its own temporary warehouse (checked: one `ingest`
row per command in ``runs``). The result is recorded as a benchmark run (``eventatlas.store.benchmarking``).
``--smoke`` runs the direct path once and leaves out the Prefect arm (its temporary server alone takes
longer than a smoke run may).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _cli(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([str(Path(sys.executable).with_name("eventatlas")), *args], env=env, capture_output=True,
                       text=True, timeout=600)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{args} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dt


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sample", default=str(REPO / "datasets" / "samples" / "maven" / "train.jsonl"))
    ap.add_argument("--kb", type=int, default=100, help="grow the sample to about this size (its documents "
                    "repeated under new ids), like the issue's 100 KB file; 0 keeps it as is")
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    from eventatlas.store import benchmarking

    a = benchmarking.parse_args(ap, argv, smoke={"repeats": 1, "kb": 0})
    bench = benchmarking.Benchmark("startup", a)
    saved = {k: os.environ.get(k) for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE")}
    root = benchmarking.scratch_dir(a, bench.run_id)
    source = Path(a.sample)
    if a.kb:
        lines = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()]
        grown, i = [], 0
        while sum(map(len, grown)) < a.kb * 1024:
            doc = dict(lines[i % len(lines)])
            doc["id"] = f"{doc['id']}-copy{i}"
            grown.append(json.dumps(doc, ensure_ascii=False) + "\n")
            i += 1
        a.sample = str(root / f"{source.stem}_{a.kb}kb.jsonl")
        Path(a.sample).write_text("".join(grown), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
               PREFECT_HOME=str(root / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    times: dict[str, list[float]] = {"prefect_temporary_server": [], "direct": []}
    modes = {"prefect_temporary_server": "always", "direct": "auto"}
    if a.smoke:
        del modes["prefect_temporary_server"], times["prefect_temporary_server"]
    try:
        # the first Prefect run also creates its database: a user's first command pays that once;
        # it is timed separately and not in the medians
        first = None if a.smoke else _cli(["ingest", "maven", "--path", a.sample, "--dataset", "warmup"],
                                          {**env, "EVENTATLAS_PREFECT": "always"})
        for i in range(a.repeats):
            for name, mode in modes.items():
                times[name].append(_cli(["ingest", "maven", "--path", a.sample, "--dataset", f"s{i}_{mode}"],
                                        {**env, "EVENTATLAS_PREFECT": mode}))
        # the work itself, in-process (imports paid before the clock starts)
        os.environ.update({k: env[k] for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE")})
        from eventatlas.cli.data import _ingest_here

        _ingest_here("maven", a.sample, False, "inproc_warm", None)
        work = []
        for i in range(a.repeats):
            t0 = time.perf_counter()
            _ingest_here("maven", a.sample, False, f"inproc{i}", None)
            work.append(time.perf_counter() - t0)
        import duckdb

        with duckdb.connect(str(root / "wh.duckdb"), read_only=True) as con:
            recorded = con.execute("SELECT count(*) FROM runs WHERE flow = 'ingest' AND status = 'completed'").fetchone()[0]
        expected = (0 if a.smoke else 1) + len(modes) * a.repeats + 1 + a.repeats
        med = {k: statistics.median(v) for k, v in times.items()}
        out = {
            "sample": (str(source.relative_to(REPO)) if source.is_relative_to(REPO) else str(source))
                      + (f" grown to {a.kb} KB (documents repeated under new ids)" if a.kb else ""),
            "sample_bytes": Path(a.sample).stat().st_size,
            "repeats": a.repeats,
            "seconds": times,
            "median_s": med,
            "first_prefect_run_s (creates its database)": first,
            "work_in_process_s": work,
            "work_median_s": statistics.median(work),
            "overhead_direct_s": med["direct"] - statistics.median(work),
            "speedup_direct_vs_prefect": med["prefect_temporary_server"] / med["direct"] if len(med) == 2 else None,
            "runs_recorded": recorded, "runs_expected": expected,
            "threads": os.environ.get("OMP_NUM_THREADS"),
        }
        if recorded != expected:
            raise SystemExit(f"run records lost: {recorded} of {expected} in the warehouse")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        for k, v in saved.items():  # the in-process part pointed these at its scratch root
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    print(json.dumps(out, indent=1))
    bench.finish([benchmarking.case("s", med["direct"], med.get("prefect_temporary_server"), higher_is_better=False,
                                    setting=f"eventatlas ingest maven, {out['sample_bytes']} bytes",
                                    ours_label="direct (no Prefect API)", baseline_label="through a temporary Prefect server",
                                    ours_samples=times["direct"],
                                    baseline_samples=times.get("prefect_temporary_server", []))], out, out=a.out)
    return out


if __name__ == "__main__":
    main()
