"""Datasets in and out: migrate, ingest, ingest-samples, datasets, restore, extract-events, build-wikievents."""
from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from .. import config
from .base import (_DEBUG, _fail, app, console, dataset_dir, error_line, local_engine, PANEL_DATA, PANEL_OPS,
                   print_warning, read_root, run_flow, split, unknown, use_prefect, wants_prefect)
from .tables import print_rows


@app.command(rich_help_panel=PANEL_OPS,
             short_help="Create or upgrade the warehouse (migrations, views)")
def migrate() -> None:
    """Create or upgrade the DuckDB warehouse (apply pending migrations, refresh views)."""
    from ..store.warehouse import Warehouse

    wh = Warehouse()
    applied = wh.migrate()
    wh.refresh_views()
    console.print(f"warehouse {wh.path}: applied {applied or 'nothing (up to date)'}; "
                  f"versions {[v for v, _ in wh.schema_versions()]}", markup=False)


@app.command(rich_help_panel=PANEL_DATA,
             short_help="Ingest a dataset into the common schema (or --download it)")
def ingest(
    name: str = typer.Argument(..., help="reader / registry name, e.g. framenet, maven, ace2005, ontoevent"),
    path: Optional[Path] = typer.Option(None, "--path", help="local file or directory with the data "
                                        "(default: the registry's path under the shared data dir, when it has one)"),
    download: bool = typer.Option(False, "--download", help="download the official release (checksum verified)"),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="name to store the dataset under"),
    sha256: Optional[List[str]] = typer.Option(None, "--sha256", metavar="[NAME=]HEX",
                                               help="expected checksum of a download the registry has none pinned "
                                                    "for: NAME=HEX per file (repeat), or HEX for a one-file dataset"),
    sha256_file: Optional[Path] = typer.Option(None, "--sha256-file", metavar="SUMS", exists=True, dir_okay=False,
                                               help="checksums of the download, 'HEX  FILENAME' lines as sha256sum "
                                                    "writes them"),
    insecure_skip_checksum: bool = typer.Option(False, "--insecure-skip-checksum",
                                                help="download without checksum verification (not recommended; "
                                                     "prints the computed sums to pin next time)"),
    allow_shrink: bool = typer.Option(False, "--allow-shrink", help="replace the dataset even when the new version "
                                      "has under half the rows of the current one (that one is kept: "
                                      "`eventatlas datasets --versions`, `eventatlas restore`)"),
    option: Optional[List[str]] = typer.Option(None, "--option", "-o", metavar="KEY=VALUE",
                                               help="a reader option (repeat), e.g. text_column=body for the text "
                                                    "reader"),
) -> None:
    """Ingest one dataset into the common schema, recorded in the warehouse (through the `ingest` flow when a
    Prefect API is configured, else directly: see EVENTATLAS_PREFECT)."""
    from ..readers import REGISTRY

    if name not in REGISTRY:  # before anything is imported, read or recorded
        unknown("reader", name, REGISTRY)
    from ..data.download import (ChecksumError, ChecksumRequired, DownloadFailed, check_sums, parse_sha256_args,
                            sha256sum_lines)

    try:  # checksum arguments are settled before Prefect starts
        sums = parse_sha256_args(sha256, sha256_file)
        if (sums or insecure_skip_checksum) and not download:
            raise ValueError("--sha256/--sha256-file/--insecure-skip-checksum apply to --download only")
        if download and path is None:
            check_sums(name, sums, insecure_skip_checksum)
    except (ValueError, OSError, ChecksumRequired) as e:
        _fail(str(e), code=2)
    from ..errors import InputError

    opts = {k: v for k, v in (("sha256", sums), ("insecure_skip_checksum", insecure_skip_checksum),
                              ("allow_shrink", allow_shrink)) if v}
    opts.update(_reader_options(option or []))
    try:
        args = (name, str(path) if path else None, download, dataset, opts or None)
        if use_prefect():
            man = run_flow("ingest", *args)
        else:
            man = _ingest_here(*args)
    except (InputError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:  # names file and record
        if _DEBUG["on"]:
            traceback.print_exc()
        _fail(error_line(e), code=2)
    except KeyError as e:  # a registry entry the dataset needs is missing
        _fail(str(e).strip("'\""), code=2)
    except (ChecksumError, ChecksumRequired, DownloadFailed) as e:  # final: one line, no retry
        _fail(str(e))
    console.print(f"ingested [bold]{escape(str(man.get('dataset')))}[/bold] -> {escape(str(man.get('dataset_dir')))}: "
                  f"rows {escape(str(man.get('rows')))}, rejects {escape(str(man.get('rejects', man.get('reject_counts'))))}",
                  soft_wrap=True)
    dl = man.get("download") or {}
    unverified = {f: h for f, h in (dl.get("sha256") or {}).items() if not (dl.get("verified") or {}).get(f)}
    if unverified:
        console.print("downloaded without checksum verification; computed sums (save them to a file and pass "
                      "--sha256-file next time):", soft_wrap=True)
        console.print(sha256sum_lines(unverified), markup=False, highlight=False, soft_wrap=True)


_INGEST_KEYWORDS = {"path", "out_dir", "dataset", "download", "progress", "allow_shrink", "sha256",
                    "insecure_skip_checksum"}  # the ingest's own arguments: not reader options


def _reader_options(pairs: List[str]) -> dict:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.isidentifier() or key in _INGEST_KEYWORDS:
            _fail(f"--option {pair!r}: expected KEY=VALUE with a reader option as KEY (e.g. text_column=body)", code=2)
        out[key] = value
    return out


def _ingest_here(name: str, path: Optional[str], download: bool, dataset: Optional[str],
                 opts: Optional[dict]) -> dict:
    """The ingest pipeline in this process; a run record that waits because the warehouse was busy is said."""
    from ..pipelines.ingest import ingest
    from ..store.publishing import pending_dir

    out = ingest(name, path, download, dataset, opts, engine=local_engine())
    man = out["manifest"]
    if out["published"].get("queued"):
        print_warning(f"the ingest landed in {man['dataset_dir']}; its run record waits in "
                      f"{pending_dir(out['published']['warehouse'])} (`eventatlas publish --pending`)")
    return man


@app.command(rich_help_panel=PANEL_DATA,
             short_help="Find event mentions with a saved detector: a new dataset")
def detect(
    dataset: str = typer.Argument(..., help="ingested dataset (e.g. your text: `ingest text --path FILES --dataset "
                                            "NAME`) or a dataset directory"),
    model: str = typer.Option(..., "--model", help="a saved detector, run:<id> (`eventatlas models` lists them; "
                                                   "train one: `eventatlas train event_detection maven_subset`)"),
    name: Optional[str] = typer.Option(None, "--name", help="the new dataset (default <dataset>_detected)"),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="identification threshold (default: the one dev chose, on the "
                                                   "model's card)"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    batch_size: int = typer.Option(64, "--batch-size", min=1),
    runner: str = typer.Option("local", "--runner", help="where the shards run: local | process[:N] | dask[:N] | "
                                                         "dask:tcp://host:8786 | ray[:N] | ray:ADDRESS (README 'Scale out')"),
    shards: Optional[int] = typer.Option(None, "--shards", min=1, help="split the documents into this many shards "
                                                                      "(default: 1 locally, else the runner's workers)"),
) -> None:
    """Find event mentions in a dataset's sentences with a saved detector and write them as a new dataset
    (unlabelled mentions: each with the detector's score and predicted type), recorded in the warehouse."""
    from ..errors import InputError
    from ..modeling.saved import ModelError
    from ..run.scaleout import parse_runner

    try:
        spec = parse_runner(runner)
    except (ValueError, RuntimeError) as e:
        _fail(error_line(e), code=2)
    n = shards or (spec.n_workers() if spec.distributed else 1)
    args = (dataset, model, name, threshold, device, batch_size, n)
    try:
        if wants_prefect(runner):
            man = run_flow("detect", *args, runner=runner)
        else:
            from ..pipelines.detect import detect as pipeline

            man = pipeline(*args, engine=local_engine(runner))["manifest"]
    except (InputError, ModelError, FileNotFoundError, ValueError) as e:
        _fail(error_line(e), code=2)
    d = man["detection"]
    console.print(f"detected {d['mentions']} mentions in {d['sentences']} sentences of {d['source_dataset']} "
                  f"({d['sentences_per_s']:.0f} sentences/s, {d['shards']} shard(s) on {runner}, {d['model']}, "
                  f"threshold {d['threshold']:.2f}) -> {man['dataset']} ({man['dataset_dir']})",
                  markup=False, soft_wrap=True, highlight=False)


@app.command("ingest-samples", rich_help_panel=PANEL_DATA,
             short_help="Ingest every shipped sample (datasets/samples/)")
def ingest_samples() -> None:
    """Ingest every shipped sample file (datasets/samples/) into the data root."""
    from ..data.ingest import ingest_samples as run

    mans = run()
    mans = list(mans.values()) if isinstance(mans, dict) else list(mans)
    print_rows(["dataset", "rows"], [(m.get("dataset"), json.dumps(m.get("rows"))) for m in mans],
               title=f"samples ingested into {config.datasets_dir()}")


@app.command(rich_help_panel=PANEL_DATA,
             short_help="List the ingested datasets with their row counts")
def datasets(versions: Optional[str] = typer.Option(None, "--versions", help="list the kept earlier versions "
                                                    "of this dataset (for `eventatlas restore`)")) -> None:
    """List ingested datasets (those whose manifest landed) with row counts."""
    read_root(warehouse=False)
    if versions:
        from ..data.ingest import list_versions

        vs = list_versions(versions)
        if not vs:
            console.print(f"no kept versions of {versions} under {config.datasets_dir() / '.versions'}", markup=False)
            return
        print_rows(["version", "ingested_at", "rows"], [(v["version"], v["ingested_at"], json.dumps(v["rows"])) for v in vs],
                   title=f"kept versions of {versions}")
        return
    rows = []
    for man_path in sorted(config.datasets_dir().glob("*/manifest.json")):
        man = json.loads(man_path.read_text(encoding="utf-8"))
        r = man.get("rows") or {}
        rows.append((man_path.parent.name, man.get("reader") or man.get("format") or "", r.get("mentions", 0),
                     r.get("event_types", 0), r.get("event_pairs", 0), sum((man.get("rejects") or {}).values())
                     if isinstance(man.get("rejects"), dict) else man.get("rejects")))
    if not rows:
        console.print(f"no datasets under {config.datasets_dir()} (try `eventatlas ingest-samples`)", markup=False)
        return
    print_rows(["dataset", "reader", "mentions", "event_types", "event_pairs", "rejects"], rows,
               title=str(config.datasets_dir()))


@app.command(rich_help_panel=PANEL_DATA,
             short_help="Make a kept earlier version of a dataset current again")
def restore(dataset: str = typer.Argument(..., help="ingested dataset name"),
            version: str = typer.Argument(..., help="a version from `eventatlas datasets --versions DATASET`")) -> None:
    """Make a kept earlier version of a dataset current again (the current one is kept as a version)."""
    from ..data.ingest import restore_version
    from ..errors import InputError

    try:
        man = restore_version(dataset, version)
    except InputError as e:
        _fail(str(e), code=2)
    console.print(f"restored {dataset} to {version}: rows {json.dumps(man.get('rows'))}", markup=False)


@app.command("extract-events", rich_help_panel=PANEL_DATA,
             short_help="(subject, verb, object) events for SWCC to train on")
def extract_events_cmd(
    source: str = typer.Argument(..., help="ingested dataset name (or directory) whose sentences are parsed; with "
                                 "--from framenet: a FrameNet release directory or zip with lu/ (or fulltext/) XML"),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="name of the new event-co-occurrence dataset "
                                          "(default: <source>_svo, or framenet_svo)"),
    parser: str = typer.Option("en_core_web_sm", "--parser", help="an installed spaCy pipeline by package name or "
                               "directory (spacy:<name or path>, or just the name or path), or import:<module>:<function> "
                               "for any other Parser"),
    origin: str = typer.Option("parse", "--from", help="parse: dependency-parse a dataset's sentences; framenet: read "
                               "FrameNet's grammatical-function layer (no parser)"),
    chunk: int = typer.Option(32, "--chunk", min=2, help="--from framenet: events of one frame per document"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="default: <data>/datasets/<dataset>"),
) -> None:
    """(subject, verb, object) events into a dataset SWCC trains on (`eventatlas train swcc <dataset>`, or
    beside another through the `extra_datasets` param): by dependency parse of an ingested dataset's
    sentences, or (`--from framenet`) from FrameNet's GF layer; prints the counts."""
    if origin not in ("parse", "framenet"):
        unknown("--from", origin, ("parse", "framenet"))
    if origin == "framenet":
        from ..errors import InputError
        from ..swcc.framenet_events import write_framenet_events

        name = dataset or "framenet_svo"
        if not Path(source).exists():
            _fail(f"FrameNet release {source!r} not found (a directory or zip)", code=2)
        try:
            man = write_framenet_events(Path(source), out_dir or config.datasets_dir() / name, dataset=name,
                                        chunk=chunk)
        except (ValueError, InputError) as e:
            _fail(str(e), code=2)
        console.print(json.dumps({"dataset": name, "from": "framenet", **man["stats"], "rejects": man["rejects"]}),
                      markup=False, soft_wrap=True)
        return
    sdir = dataset_dir(source)
    if not (sdir / "mentions.parquet").exists():
        _fail(f"dataset {source!r} has no mentions ({sdir / 'mentions.parquet'} is missing)", code=2)
    from ..swcc.extract import load_parser, sentences_by_document, write_extracted

    name = dataset or f"{sdir.name}_svo"
    try:
        parse = load_parser(parser)
    except (ValueError, RuntimeError) as e:
        _fail(str(e), code=2)
    man = write_extracted(sentences_by_document(sdir), parse, out_dir or config.datasets_dir() / name, dataset=name,
                          source=str(sdir), parser=parser)
    console.print(json.dumps({"dataset": name, "parser": parser, **man["stats"]}), markup=False, soft_wrap=True)


@app.command("build-wikievents", rich_help_panel=PANEL_DATA,
             short_help="Build the multilingual event-grounding dataset (Wikidata)")
def build_wikievents(
    backend: str = typer.Option("dumps", "--backend", help="dumps | api"),
    dumps: Optional[Path] = typer.Option(None, "--dumps", exists=True, dir_okay=False,
                                         help="JSON/YAML dump layout: {wikidata: path, wikipedia: {lang: {xml, index}}, "
                                              "wikinews: {lang: {xml, categorylinks}}, dates: {...}}"),
    root: Optional[str] = typer.Option(None, "--root", help="api: seed item, e.g. Q362 (events under World War II)"),
    languages: Optional[List[str]] = typer.Option(None, "--languages", help="default: the 44 XLEL-WD languages"),
    contact: Optional[str] = typer.Option(None, "--contact", help="api: contact for the User-Agent (required off-loopback)"),
    params: Optional[str] = typer.Option(None, "--params", help='JSON filter parameters, e.g. \'{"min_mentions": 30}\''),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="default: <data>/datasets/wikigrounding"),
) -> None:
    """Build the hierarchical multilingual event-grounding dataset (Wikidata + Wikipedia + Wikinews)."""
    if backend not in ("dumps", "api"):
        unknown("backend", backend, ("dumps", "api"))
    try:
        p = json.loads(params) if params else None
        layout = None
        if dumps is not None:
            import yaml

            layout = yaml.safe_load(dumps.read_text(encoding="utf-8"))
    except ValueError as e:
        _fail(f"bad --params/--dumps: {e}", code=2)
    api = None
    if backend == "api":
        from ..wiki.http import is_contact

        who = contact or os.environ.get("EVENTATLAS_CONTACT")
        if not (is_contact(who) or (not who and is_contact(os.environ.get("EVENTATLAS_USER_AGENT")))):
            _fail("build-wikievents --backend api needs a contact for the User-Agent (Wikimedia policy): pass "
                  f"--contact <URL or e-mail> or set EVENTATLAS_CONTACT{f' ({who!r} is neither)' if who else ''}", code=2)
        api = {"root": root, "client_options": {"contact": contact, "cache_dir": str(config.cache_dir() / "http")},
               "checkpoint": str(config.cache_dir() / "wiki-crawl" / (root or "all"))}
    man = run_flow("build-wikievents", backend=backend, dumps=layout, api=api,
                   out_dir=str(out_dir) if out_dir else None, languages=split(languages), params=p)
    console.print(json.dumps({k: man.get(k) for k in ("build_id", "rows", "rejects") if k in man}, indent=1, default=str),
                  markup=False)
