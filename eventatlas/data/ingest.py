"""Drive a reader into a dataset directory: all tables land or none, manifest last.

``ingest(name, path)`` streams ``(table, row)`` pairs from ``eventatlas.readers.<name>`` into a
``DatasetWriter``, writes the tolerated problems as the ``rejects`` table and returns the manifest
(dataset, reader, source, input fingerprint, row counts, reject counts by reason, reader stats,
schema version, ingested_at). A fatal problem raises ``InputError`` (file + line/record) and leaves
the previous tables of that dataset untouched.

Guards against silent data loss: an ingest whose reader yields nothing in the tables it
is expected to fill (``EXPECTED_TABLES`` of the reader module, default ``mentions``) or keeps under
``MIN_ACCEPT`` of its records is refused ("this does not look like <reader> input: <first reject>");
a new version with under ``SHRINK_RATIO`` of the previous version's rows needs ``allow_shrink=True``;
repeated ids (documents with their mentions, types, mentions) are rejects (``readers._common.unique_ids``). A refused or failed
ingest keeps the previous version, leaves no directory behind for a new dataset name, and the next
run of a dataset removes temp files an earlier killed ingest left (only ones older than this process).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .. import config
from .download import fetch
from ..errors import InputError
from ..io import (DatasetWriter, Rejects, clean_staging, fault_point, fingerprint_paths, link_file, naming_disk_full,
                  staging_dir, switch_dir)
from ..names import check_name
from ..readers import REGISTRY, get_reader
from ..readers._common import DATA_ERRORS, unique_ids
from .registry import dataset_entry, load_registry
from ..schema import SCHEMA_VERSION, TABLES


def _default_path(name: str, entry: dict) -> Path:
    rel = entry.get("path")
    if not rel:
        raise ValueError(f"dataset {name!r} has no default path; pass path=... (or download=True where the registry has a download)")
    p = config.shared_data() / rel
    if not p.exists():
        raise FileNotFoundError(f"default input for {name!r} not found: {p} (set EVENTATLAS_SHARED_DATA or pass path=...)")
    return p


SHRINK_RATIO = 0.5  # a new version with fewer than this share of the previous rows needs allow_shrink
KEEP_VERSIONS = 3  # earlier versions kept per dataset under <datasets>/.versions/<dataset>/
MIN_ACCEPT = 0.05  # refuse when fewer than this share of the records survive (the rest rejected)
_PROCESS_START = time.time()  # fallback when psutil is missing: module import ~ process start


def _process_start() -> float:
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - psutil absent or /proc unreadable: the import time is close enough
        return _PROCESS_START


def clean_stale_temp(out: Path) -> list[Path]:
    """Remove what a killed ingest or restore of ``out`` left: its staging directory (the process is gone,
    :func:`~eventatlas.io.clean_staging`), a half-made kept version (``.versions/<name>/*.partial``), and
    ``.<table>.parquet.*.tmp`` / ``.manifest.json.*.tmp`` files in ``out`` (only files last modified
    before this process started: a concurrent writer's are newer)."""
    removed = clean_staging(out)
    start = _process_start()
    for p in (out.parent / ".versions" / out.name).glob("*.partial"):
        if p.stat().st_mtime < start:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    if not out.is_dir():
        return removed
    for p in list(out.glob(".*.parquet.*.tmp")) + list(out.glob(".manifest.json.*.tmp")):
        try:
            if p.stat().st_mtime < start:
                p.unlink()
                removed.append(p)
        except FileNotFoundError:
            pass
    return removed


def _expected(reader) -> tuple[str, ...]:
    return tuple(getattr(reader, "EXPECTED_TABLES", ("mentions",)))


def _previous(out: Path) -> dict | None:
    try:
        return json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _check_yield(name: str, path: Path, rows: dict[str, int], expected: tuple[str, ...], rejects: Rejects) -> None:
    """Refuse an ingest where (almost) nothing the reader should produce survived."""
    kept = sum(rows.get(t, 0) for t in expected)
    if kept and len(rejects) <= kept * (1 - MIN_ACCEPT) / MIN_ACCEPT:
        return
    what = " or ".join(expected)
    if rejects.rows:
        r = rejects.rows[0]
        first = f"{r['reason']}" + (f" ({r['detail']})" if r["detail"] else "")
        raise InputError(r["source"] or path, r["location"] or "-",
                         f"this does not look like {name} input: {first}; {len(rejects)} records rejected, "
                         f"{kept} {what} kept; nothing was written (check the reader name and the file)")
    raise InputError(path, "-", f"this does not look like {name} input: no {what} found (empty or another format); "
                     "nothing was written (check the reader name and the file)")


def _check_shrink(path: Path, out: Path, prev: dict | None, rows: dict[str, int], expected: tuple[str, ...],
                  allow_shrink: bool) -> None:
    """The refusal names the input (what the user passed), and the dataset it would have replaced."""
    if allow_shrink or not prev:
        return
    before = sum((prev.get("rows") or {}).get(t, 0) for t in expected)
    after = sum(rows.get(t, 0) for t in expected)
    if before and after < before * SHRINK_RATIO:
        raise InputError(path, "-",
                         f"the new version has {after} {'+'.join(expected)} rows, the current one of {out.name!r} {before} "
                         f"(under {SHRINK_RATIO:.0%}); nothing was replaced; pass --allow-shrink (allow_shrink=True) "
                         "to replace it anyway (the current version is kept under .versions/)")


def _keep_version(out: Path, prev: dict) -> Path | None:
    """Hard-link the current tables and manifest into ``<datasets>/.versions/<dataset>/<ingested_at>/``
    before they are replaced, so a shrinking ingest stays recoverable (cheap: no data is copied)."""
    stamp = str(prev.get("ingested_at") or "unknown").replace(":", "")
    dest = out.parent / ".versions" / out.name / stamp
    if dest.exists():
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with naming_disk_full(dest):  # links can need a directory block, copies (no links) the data
            tmp.mkdir(parents=True)
            _link_files([*out.glob("*.parquet"), out / "manifest.json"], tmp)
            fault_point("keep_version")
            os.replace(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # at once, not at the next ingest
        raise
    for old in sorted(p for p in dest.parent.iterdir() if not p.name.endswith(".partial"))[:-KEEP_VERSIONS]:
        shutil.rmtree(old, ignore_errors=True)
    return dest


def _link_files(files, dest: Path) -> None:
    """Hard-link ``files`` into ``dest`` (a copy where links are impossible); no file is ever written in
    place, so a link shared by two versions never changes under either."""
    for p in files:
        link_file(p, dest / p.name)


def list_versions(dataset: str, datasets_dir: str | Path | None = None) -> list[dict]:
    """Kept earlier versions of ``dataset`` (newest last): ``{version, path, rows, ingested_at}``."""
    root = (Path(datasets_dir) if datasets_dir else config.datasets_dir()) / ".versions" / check_name(dataset, "dataset")
    out = []
    for d in sorted(root.glob("*/manifest.json")):
        man = json.loads(d.read_text(encoding="utf-8"))
        out.append({"version": d.parent.name, "path": str(d.parent), "rows": man.get("rows"), "ingested_at": man.get("ingested_at")})
    return out


def restore_version(dataset: str, version: str, datasets_dir: str | Path | None = None) -> dict:
    """Make a kept version the current one again (the current one is kept as a version first)."""
    root = Path(datasets_dir) if datasets_dir else config.datasets_dir()
    check_name(dataset, "dataset"), check_name(version, "version")
    src, out = root / ".versions" / dataset / version, root / dataset
    if not (src / "manifest.json").exists():
        known = ", ".join(v["version"] for v in list_versions(dataset, root)) or "none"
        raise InputError(src, "-", f"no kept version {version!r} of {dataset!r}; kept versions: {known}")
    clean_stale_temp(out)
    prev = _previous(out)
    if prev:
        _keep_version(out, prev)
    man = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    with naming_disk_full(out):
        stage = staging_dir(out)  # the version is assembled beside the dataset and switched in at once
    try:
        with naming_disk_full(out):
            _link_files([*src.glob("*.parquet"), src / "manifest.json"], stage)
            fault_point("restore_staged")
            switch_dir(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return man


def with_dataset_dir(manifest: dict, default_name: str) -> dict:
    """The manifest plus ``dataset`` and ``dataset_dir`` (where the tables landed), as the ingest
    flow and the CLI's direct path return it."""
    ds = manifest.get("dataset") or default_name
    return {**manifest, "dataset": ds, "dataset_dir": str(manifest.get("path") or (config.datasets_dir() / ds))}


def ingest(name: str, path: str | Path | None = None, *, out_dir: str | Path | None = None, dataset: str | None = None,
           download: bool = False, progress: bool | None = None, allow_shrink: bool = False, **opts: Any) -> dict:
    """Ingest ``path`` with reader ``name`` into ``out_dir`` (default ``datasets_dir()/<dataset>``).

    Refuses (``InputError``, previous version untouched) an input where nothing (or under ``MIN_ACCEPT``)
    of what the reader expects survives, and a version that shrinks under ``SHRINK_RATIO`` of the previous
    one unless ``allow_shrink``; a replaced version is kept under ``<datasets>/.versions/<dataset>/``."""
    if name not in REGISTRY:
        raise KeyError(f"unknown reader {name!r}; known: {', '.join(sorted(REGISTRY))}")
    if dataset is not None:
        check_name(dataset, "--dataset")  # before anything is read or written
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
    dataset = check_name(dataset or entry.get("dataset") or reader.DEFAULT_DATASET, "--dataset")
    out = Path(out_dir) if out_dir else config.datasets_dir() / dataset
    rejects = Rejects(dataset)
    stats: dict[str, int] = {}
    t0 = time.perf_counter()
    clean_stale_temp(out)  # first: it may roll a killed switch forward
    existed = out.exists()
    prev = _previous(out)
    # a reader that reads only some files under ``path`` (framenet_grounding) names them: only those are fingerprinted
    fingerprint = fingerprint_paths(reader.input_paths(path, **opts) if hasattr(reader, "input_paths") else [path])
    try:
        manifest = _write(name, reader, path, out, dataset, rejects, stats, progress, prev, allow_shrink, fingerprint, fetched,
                          entry, t0, opts)
    except BaseException:
        if not existed:  # a failed ingest under a new name leaves nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    manifest["path"] = str(out)
    return manifest


def _named_errors(rows_in, name: str, path: Path, rows: dict[str, int]):
    """Safety net: a Python error that escapes a reader (a record shape no guard foresaw) becomes an
    InputError naming the input, instead of a traceback; --debug shows the cause."""
    try:
        yield from rows_in
    except InputError:
        raise
    except DATA_ERRORS as e:
        raise InputError(path, f"after {sum(rows.values())} rows", f"unexpected input structure ({type(e).__name__}: {e}); "
                         f"this does not fit the {name} format") from e
    except IsADirectoryError as e:
        raise InputError(e.filename or path, "-", "is a directory; pass the file (or the release directory the reader expects)") from None


def _write(name, reader, path, out, dataset, rejects, stats, progress, prev, allow_shrink, fingerprint, fetched, entry, t0,
           opts) -> dict:
    rows: dict[str, int] = {}
    def bad_row(table: str, row: dict, err: Exception) -> None:  # a value of the wrong type reached a table
        key = next((f"{k} {row[k]!r}" for k in ("mention_id", "doc_id", "type_id") if row.get(k) is not None), "a row")
        rejects.add(row.get("source") if table == "documents" else path, f"{table} {key}", "bad_field",
                    f"{type(err).__name__}: {err}", str(row)[:300])
        rows[table] -= 1

    with DatasetWriter(out, dataset, on_bad_row=bad_row) as w:
        bar = tqdm(desc=f"ingest {name}", unit=" rows", disable=(None if progress is None else not progress), leave=False)
        try:
            rows_in = reader.read(path, dataset=dataset, rejects=rejects, stats=stats, **opts)
            for table, row in unique_ids(_named_errors(rows_in, name, path, rows), rejects, path):
                if table not in TABLES or table == "rejects":
                    raise InputError(path, "-", f"reader {name!r} produced unknown table {table!r}")
                if row.get("dataset") != dataset:
                    row = {**row, "dataset": dataset}
                w.write(table, row)
                rows[table] = rows.get(table, 0) + 1
                bar.update()
        finally:
            bar.close()
        w.flush([t for t in TABLES if t != "rejects"])
        fault_point("read")
        _check_yield(name, path, rows, _expected(reader), rejects)
        _check_shrink(path, out, prev, rows, _expected(reader), allow_shrink)
        if prev:
            _keep_version(out, prev)
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


__all__ = ["ingest", "ingest_samples", "list_ingested", "list_versions", "restore_version", "clean_stale_temp", "SCHEMA_VERSION"]


def ingest_dataset(name: str, path: str | None = None, download: bool = False, dataset: str | None = None,
                   opts: dict[str, Any] | None = None) -> dict:
    """The ingest job of the `ingest` flow's task and of the CLI's direct path: :func:`ingest` with the
    options as the flow passes them, returning the manifest with ``dataset`` and ``dataset_dir``."""
    return with_dataset_dir(ingest(name, path, dataset=dataset, download=download, **(opts or {})), dataset or name)


def main(argv: list[str] | None = None) -> int:
    """``python -m eventatlas.data.ingest NAME [PATH] [--download ...]`` or ``--samples``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m eventatlas.data.ingest")
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
