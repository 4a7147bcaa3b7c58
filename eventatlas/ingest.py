"""Drive a reader into a dataset directory: all tables land or none, manifest last.

``ingest(name, path)`` streams ``(table, row)`` pairs from ``eventatlas.readers.<name>`` into a
``DatasetWriter``, writes the tolerated problems as the ``rejects`` table and returns the manifest
(dataset, reader, source, input fingerprint, row counts, reject counts by reason, reader stats,
schema version, ingested_at). A fatal problem raises ``InputError`` (file + line/record) and leaves
the previous tables of that dataset untouched.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from . import config
from .download import fetch
from .io import DatasetWriter, InputError, Rejects, fingerprint_paths
from .readers import REGISTRY, get_reader
from .registry import dataset_entry, load_registry
from .schema import SCHEMA_VERSION, TABLES


def _default_path(name: str, entry: dict) -> Path:
    rel = entry.get("path")
    if not rel:
        raise ValueError(f"dataset {name!r} has no default path; pass path=... (or download=True where the registry has a download)")
    p = config.shared_data() / rel
    if not p.exists():
        raise FileNotFoundError(f"default input for {name!r} not found: {p} (set EVENTATLAS_SHARED_DATA or pass path=...)")
    return p


def ingest(name: str, path: str | Path | None = None, *, out_dir: str | Path | None = None, dataset: str | None = None,
           download: bool = False, progress: bool | None = None, **opts: Any) -> dict:
    """Ingest ``path`` with reader ``name`` into ``out_dir`` (default ``datasets_dir()/<dataset>``)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown reader {name!r}; known: {', '.join(sorted(REGISTRY))}")
    reader = get_reader(name)
    entry = dataset_entry(name)
    fetched = None
    if path is None:
        if download:
            fetched = fetch(name, sha256=opts.pop("sha256", None), insecure_skip_checksum=opts.pop("insecure_skip_checksum", False))
            path = fetched.dir
        else:
            path = _default_path(name, entry)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input for {name!r} not found: {path}")
    dataset = dataset or entry.get("dataset") or reader.DEFAULT_DATASET
    out = Path(out_dir) if out_dir else config.datasets_dir() / dataset
    rejects = Rejects(dataset)
    stats: dict[str, int] = {}
    t0 = time.perf_counter()
    fingerprint = fingerprint_paths([path])
    with DatasetWriter(out, dataset) as w:
        bar = tqdm(desc=f"ingest {name}", unit=" rows", disable=(None if progress is None else not progress), leave=False)
        try:
            for table, row in reader.read(path, dataset=dataset, rejects=rejects, stats=stats, **opts):
                if table not in TABLES or table == "rejects":
                    raise InputError(path, "-", f"reader {name!r} produced unknown table {table!r}")
                if row.get("dataset") != dataset:
                    row = {**row, "dataset": dataset}
                w.write(table, row)
                bar.update()
        finally:
            bar.close()
        for r in rejects.rows:
            w.write("rejects", r)
        manifest = w.commit(
            {
                "reader": name,
                "source": str(path.resolve()),
                "fingerprint": fingerprint,
                "rejects": rejects.counts(),
                "stats": stats,
                "options": {k: str(v) for k, v in opts.items()},
                "language": entry.get("language"),
                "ontology": entry.get("ontology"),
                "ingested_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "seconds": round(time.perf_counter() - t0, 3),
                # what a download fetched: sha256 per file and whether it was verified (pin unverified ones)
                **({"download": {"sha256": fetched.sums, "verified": fetched.verified}} if fetched else {}),
            }
        )
    manifest["path"] = str(out)
    return manifest


def ingest_samples(out_dir: str | Path | None = None, *, names: list[str] | None = None) -> list[dict]:
    """Ingest every shipped sample (``datasets/samples/<sample>``) as dataset ``<dataset>_sample``
    under ``out_dir`` (default ``datasets_dir()``); used by ``make demo``."""
    root = Path(out_dir) if out_dir else config.datasets_dir()
    out = []
    for name, entry in load_registry().items():
        if names and name not in names or not entry.get("sample"):
            continue
        sample = config.samples_dir() / entry["sample"]
        if not sample.exists():
            raise FileNotFoundError(f"sample for {name!r} missing: {sample}")
        ds = f"{entry.get('dataset') or name}_sample"
        out.append(ingest(name, sample, out_dir=root / ds, dataset=ds, progress=False))
    return out


def list_ingested(datasets_dir: str | Path | None = None) -> list[dict]:
    """Manifests of the ingested datasets (a directory without ``manifest.json`` is not one)."""
    root = Path(datasets_dir) if datasets_dir else config.datasets_dir()
    if not root.exists():
        return []
    out = []
    for m in sorted(root.glob("*/manifest.json")):
        man = json.loads(m.read_text(encoding="utf-8"))
        man["path"] = str(m.parent)
        out.append(man)
    return out


__all__ = ["ingest", "ingest_samples", "list_ingested", "SCHEMA_VERSION"]


def main(argv: list[str] | None = None) -> int:
    """``python -m eventatlas.ingest NAME [PATH] [--download ...]`` or ``--samples``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m eventatlas.ingest")
    ap.add_argument("name", nargs="?", help=f"reader: {', '.join(sorted(REGISTRY))}")
    ap.add_argument("path", nargs="?", help="input file/directory (default: registry path under the shared data dir)")
    ap.add_argument("--dataset")
    ap.add_argument("--out-dir")
    ap.add_argument("--samples", action="store_true", help="ingest every shipped sample")
    ap.add_argument("--download", action="store_true", help="download the official release first (registry URL)")
    ap.add_argument("--sha256", action="append", default=[], metavar="[FILE=]HEX", help="expected sha256 (per file: FILE=HEX)")
    ap.add_argument("--sha256-file", metavar="SUMS", help="checksum file as sha256sum writes it")
    ap.add_argument("--insecure-skip-checksum", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.samples:
            for m in ingest_samples(a.out_dir):
                print(json.dumps({"dataset": m["dataset"], "rows": m["rows"], "rejects": m["rejects"]}))
            return 0
        if not a.name:
            ap.error("NAME is required unless --samples")
        from .download import parse_sha256_args

        extra = {"sha256": parse_sha256_args(a.sha256, a.sha256_file), "insecure_skip_checksum": a.insecure_skip_checksum} if a.download else {}
        m = ingest(a.name, a.path, out_dir=a.out_dir, dataset=a.dataset, download=a.download, **extra)
    except (InputError, FileNotFoundError, KeyError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(m, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
