"""The ``eventatlas`` command line. Prefect is imported only inside the commands that run
flows (the core package stays Prefect-free; ``--help`` stays fast)."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Iterator, List, Optional

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from . import config

console = Console(width=max(120, Console().width))  # tables stay readable when piped
_DEBUG = {"on": False}


def _bad_input_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the input is wrong" (exit 2), as opposed to an internal failure (exit 1)."""
    from .io import InputError

    return (InputError, FileNotFoundError, IsADirectoryError, NotADirectoryError)


def error_line(e: BaseException) -> str:
    """The one-line text of an error: ``<file>:<line or record>: <what>`` for InputError (its str),
    ``<file>: <reason>`` for OS errors on a named file, else ``<Type>: <message>``."""
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, _bad_input_types()):
        return str(e).strip("'\"")
    return f"internal failure: {type(e).__name__}: {e} (rerun with --debug for the traceback)"


def print_error(msg: str) -> None:
    """``error: <msg>`` on stderr, one line, printed literally (no markup, no wrapping)."""
    print(f"error: {' '.join(str(msg).splitlines())}", file=sys.stderr, flush=True)


def print_warning(msg: str) -> None:
    """``warning: <msg>`` on stderr, one line, printed literally."""
    print(f"warning: {' '.join(str(msg).splitlines())}", file=sys.stderr, flush=True)


class _HandledErrorFilter(logging.Filter):
    """Drop Prefect's run-logger records about an error the CLI reports itself as one line (the
    traceback dumps of a failed task and flow); the run's state in Prefect still carries the message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _DEBUG["on"]:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            return not isinstance(exc, _bad_input_types())
        msg = record.getMessage()
        return not any(f"{t.__name__}(" in msg or f"{t.__name__}:" in msg for t in _bad_input_types())


_FILTER = _HandledErrorFilter()


class _ErrorsAsLines(TyperGroup):
    """Every command: bad input -> ``error: <file>:<where>: <what>`` on stderr, exit 2; any other
    uncaught exception -> one ``error: internal failure: ...`` line, exit 1; tracebacks only with --debug."""

    def invoke(self, ctx: click.Context) -> Any:
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            lg = logging.getLogger(name)
            if _FILTER not in lg.filters:
                lg.addFilter(_FILTER)
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit,
                KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the CLI boundary: one line instead of a traceback
            if _DEBUG["on"]:
                traceback.print_exc()
            print_error(error_line(e))
            raise typer.Exit(2 if isinstance(e, _bad_input_types()) else 1) from None


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_ErrorsAsLines, pretty_exceptions_enable=False,
                  help="eventatlas: event datasets in one schema, baselines, metrics and a DuckDB warehouse. "
                       "Exit codes: 0 ok, 2 bad input (one line naming file and line/record), 1 internal failure.")



for _k, _v in (("PREFECT_SERVER_ANALYTICS_ENABLED", "false"), ("HF_HUB_OFFLINE", "1"),
               ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false"),
               ("PREFECT_LOGGING_EXTRA_LOGGERS", "eventatlas"),
               # the temporary API server's 20 s default start-up budget fails on a loaded machine
               ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")):
    os.environ.setdefault(_k, _v)


@app.callback()
def _main(
    verbose: bool = typer.Option(False, "-v", "--verbose", help="show Prefect logs, library progress bars and "
                                 "warnings (default: quiet; eventatlas's own progress stays)"),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks (and Prefect's logs of failed runs) for "
                               "errors; without it an error is one line on stderr"),
) -> None:
    from .verbosity import set_verbosity

    _DEBUG["on"] = debug
    set_verbosity(verbose or debug)


def _split(values: Optional[List[str]]) -> Optional[List[str]]:
    """Accept repeated options and comma-separated lists alike."""
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def print_rows(cols: list[str], rows: list[tuple], title: str | None = None, max_rows: int = 500) -> None:
    t = Table(title=title, show_lines=False)
    for c in cols:
        t.add_column(str(c), overflow="fold")
    for r in rows[:max_rows]:
        t.add_row(*[escape(_fmt(v)) for v in r])  # cell text is data, never markup
    console.print(t)
    if len(rows) > max_rows:
        console.print(f"... {len(rows) - max_rows} more rows")


def _fail(msg: str, code: int = 1) -> None:
    # one line on stderr however long (paths), printed literally (brackets are text); exit 2 = bad input
    print_error(msg)
    raise typer.Exit(code)


PREFECT_MODE_ENV = "EVENTATLAS_PREFECT"


def prefect_api_configured() -> bool:
    """Whether a Prefect API is configured: ``PREFECT_API_URL`` in the environment or in the active
    profile of ``$PREFECT_HOME/profiles.toml`` (read as a file: importing Prefect costs seconds)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        import tomllib

        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ImportError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    prof = (data.get("profiles") or {}).get(active) or {}
    return bool(prof.get("PREFECT_API_URL"))


def use_prefect() -> bool:
    """One-shot commands (ingest, publish) run through their Prefect flow when a Prefect API is
    configured, else the core directly (no temporary Prefect server: seconds instead of 15-27 s),
    recording the run in the warehouse through the same publish path. ``EVENTATLAS_PREFECT``:
    ``auto`` (default), ``always`` (a temporary server when no API is configured), ``never``."""
    mode = (os.environ.get(PREFECT_MODE_ENV) or "auto").strip().lower()
    if mode not in ("auto", "always", "never"):
        _fail(f"{PREFECT_MODE_ENV}={mode!r}: use auto, always or never", code=2)
    return mode == "always" or (mode == "auto" and prefect_api_configured())


@contextlib.contextmanager
def _prefect_guard() -> Iterator[None]:
    """Around every flow the CLI runs (`flows.runtime.guarded`): the temporary Prefect server dies with
    this process (kill -9 included), and flow runs of earlier CLI processes that are gone are marked
    crashed first (one warning line each)."""
    from flows.runtime import guarded

    with guarded(print_warning):
        yield


def _check_device(device: str) -> None:
    """Refuse an unavailable device before any flow starts."""
    from .device import DeviceUnavailable, resolve_device

    try:
        resolve_device(device)
    except DeviceUnavailable as e:
        _fail(str(e), code=2)


@app.command()
def migrate() -> None:
    """Create or upgrade the DuckDB warehouse (apply pending migrations, refresh views)."""
    from .warehouse import Warehouse

    wh = Warehouse()
    applied = wh.migrate()
    wh.refresh_views()
    console.print(f"warehouse {wh.path}: applied {applied or 'nothing (up to date)'}; "
                  f"versions {[v for v, _ in wh.schema_versions()]}", markup=False)


@app.command()
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
) -> None:
    """Ingest one dataset into the common schema, recorded in the warehouse (through the `ingest` flow when a
    Prefect API is configured, else directly: see EVENTATLAS_PREFECT)."""
    from .download import (ChecksumError, ChecksumRequired, DownloadFailed, check_sums, parse_sha256_args,
                           sha256sum_lines)

    try:  # checksum arguments are settled before Prefect starts
        sums = parse_sha256_args(sha256, sha256_file)
        if (sums or insecure_skip_checksum) and not download:
            raise ValueError("--sha256/--sha256-file/--insecure-skip-checksum apply to --download only")
        if download and path is None:
            check_sums(name, sums, insecure_skip_checksum)
    except (ValueError, OSError, ChecksumRequired) as e:
        _fail(str(e), code=2)
    from .io import InputError

    opts = {k: v for k, v in (("sha256", sums), ("insecure_skip_checksum", insecure_skip_checksum),
                              ("allow_shrink", allow_shrink)) if v}
    try:
        if use_prefect():
            from flows.ingest import ingest as ingest_flow

            with _prefect_guard():
                man = ingest_flow(name, str(path) if path else None, download, dataset, opts or None)
        else:
            man = _ingest_direct(name, str(path) if path else None, download, dataset, opts or None)
    except (InputError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:  # names file and record
        if _DEBUG["on"]:
            traceback.print_exc()
        _fail(error_line(e), code=2)
    except KeyError as e:  # unknown reader name
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


# as the ingest task's Prefect retries (tasks/ingest.py::ingest_task_for)
DIRECT_DOWNLOAD_RETRY_DELAYS = (10, 30, 90)


def _ingest_direct(name: str, path: Optional[str], download: bool, dataset: Optional[str],
                   opts: Optional[dict]) -> dict:
    """What the `ingest` flow does, without Prefect: the core ingest, its run record, and the
    publish path (queued when the warehouse is busy), for a one-shot command with no Prefect API."""
    import time

    from .download import DownloadFailed
    from .ingest import ingest as core_ingest
    from .ingest import with_dataset_dir
    from .publishing import pending_dir, publish_records
    from .records import failed_ingest_record, ingest_record
    from .runinfo import utcnow

    started = utcnow().isoformat()
    params = {"name": name, "path": path, "download": download, "dataset": dataset, "opts": opts or {}}
    delays = list(DIRECT_DOWNLOAD_RETRY_DELAYS) if download else []
    try:
        while True:  # the flow's task retries (tasks/ingest.py): a transient download failure only
            try:
                man = core_ingest(name, path, dataset=dataset, download=download, **(opts or {}))
                break
            except DownloadFailed as e:
                if not e.transient or not delays:
                    raise
                print_warning(f"download failed ({e}); trying again in {delays[0]} s")
                time.sleep(delays.pop(0))
    except Exception as e:
        # as the flow's failure path: a failed ingest leaves a run record (status failed, one-line reason)
        try:
            publish_records([failed_ingest_record(params, e, started)], warn=print_warning)
        except Exception as pe:  # noqa: BLE001 - the ingest's own error is what the user must see
            print_warning(f"the failed ingest was not recorded: {type(pe).__name__}: {pe}")
        raise
    man = with_dataset_dir(man, dataset or name)
    rec = ingest_record(man, params, started)
    out = publish_records([rec], warn=print_warning)
    if out.queued:
        print_warning(f"the ingest landed in {man['dataset_dir']}; its run record waits in "
                      f"{pending_dir(out.warehouse)} (`eventatlas publish --pending`)")
    return man


@app.command("ingest-samples")
def ingest_samples() -> None:
    """Ingest every shipped sample file (datasets/samples/) into the data root."""
    from .ingest import ingest_samples as run

    mans = run()
    mans = list(mans.values()) if isinstance(mans, dict) else list(mans)
    print_rows(["dataset", "rows"], [(m.get("dataset"), json.dumps(m.get("rows"))) for m in mans],
               title=f"samples ingested into {config.datasets_dir()}")


@app.command()
def datasets(versions: Optional[str] = typer.Option(None, "--versions", help="list the kept earlier versions "
                                                    "of this dataset (for `eventatlas restore`)")) -> None:
    """List ingested datasets (those whose manifest landed) with row counts."""
    if versions:
        from .ingest import list_versions

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


@app.command()
def restore(dataset: str = typer.Argument(..., help="ingested dataset name"),
            version: str = typer.Argument(..., help="a version from `eventatlas datasets --versions DATASET`")) -> None:
    """Make a kept earlier version of a dataset current again (the current one is kept as a version)."""
    from .ingest import restore_version
    from .io import InputError

    try:
        man = restore_version(dataset, version)
    except InputError as e:
        _fail(str(e), code=2)
    console.print(f"restored {dataset} to {version}: rows {json.dumps(man.get('rows'))}", markup=False)


@app.command()
def embed(
    dataset: str = typer.Argument(..., help="ingested dataset name"),
    representation: Optional[List[str]] = typer.Option(None, "--representation", "-r",
                                                       help="sentence, trigger, mask, mix, window4 (default all)"),
    model: Optional[str] = typer.Option(None, "--model", help="HF id or local path (default all-MiniLM-L6-v2)"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Embed a dataset's mentions (runs the `embed` flow; cached by content and options)."""
    _check_device(device)
    from flows.embed import embed as embed_flow

    with _prefect_guard():
        out = embed_flow(dataset, _split(representation), model, {"device": device})
    print_rows(["representation", "embeddings"], sorted(out.items()), title=f"embeddings of {dataset}")


@app.command()
def cluster(
    dataset: str = typer.Argument(..., help="ingested dataset name"),
    representation: str = typer.Option("trigger", "--representation", "-r"),
    algorithm: str = typer.Option("agglomerative", "--algorithm", "-a",
                                  help="agglomerative, manifold, manifold_sym, affinity"),
    n_clusters: Optional[int] = typer.Option(None, "--n-clusters", "-k", help="default: number of gold types"),
    model: Optional[str] = typer.Option(None, "--model"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N (embedding)"),
) -> None:
    """Cluster a dataset's mentions (runs the `cluster` flow); prints the assignments path."""
    _check_device(device)
    from flows.cluster import cluster as cluster_flow

    with _prefect_guard():
        assignments = cluster_flow(dataset, representation, algorithm, n_clusters, model, seed, device)
    console.print(assignments, markup=False)


@app.command("train-all")
def train_all(
    methods: Optional[List[str]] = typer.Option(None, "--methods", help="method names (default untuned); "
                                                "`eventatlas methods` lists them with their parameters"),
    datasets: Optional[List[str]] = typer.Option(None, "--datasets", help="default: every ingested dataset each "
                                                 "method applies to"),
    seeds: Optional[List[str]] = typer.Option(None, "--seeds", help="default 0"),
    params: Optional[str] = typer.Option(None, "--params",
                                         help='JSON {method: {param: value}}, e.g. \'{"untuned": {"k_seen": 10}}\''),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N (methods that set their own "
                               "device in --params keep it)"),
    resume: bool = typer.Option(False, "--resume", help="continue killed runs of the same configuration from "
                                "their last checkpoint"),
    report: bool = typer.Option(False, "--report", help="refresh the results page <data>/report.html at the end"),
    runner: str = typer.Option("local", "--runner", help="where the cells run: local | process[:N] | dask[:N] | "
                               "dask:tcp://host:8786 (an existing Dask scheduler) | ray[:N] | ray:ADDRESS (an "
                               "existing Ray cluster; extra [ray]); see README 'Scale out'"),
) -> None:
    """Run the `train-all` flow and print the leaderboard rows it produced."""
    from .device import DeviceUnavailable, resolve_device
    from .methods import ParamError, validate_params

    # validate before importing Prefect (slow, and it binds its log handlers to this stdout)
    try:
        p = json.loads(params) if params else None
        s = [int(x) for x in _split(seeds)] if seeds else None
    except ValueError as e:
        _fail(f"bad --params/--seeds: {e}", code=2)
    m = _split(methods) or ["untuned"]
    try:
        validate_params(p, m)
        resolve_device(device)
        from .scaleout import parse_runner

        parse_runner(runner)
    except (ParamError, DeviceUnavailable, ValueError) as e:
        _fail(str(e), code=2)
    from flows.train_all import train_all as flow

    with _prefect_guard():
        out = flow(datasets=_split(datasets), methods=m, seeds=s, params=p, device=device, resume=resume,
                   report=report, runner=runner)
    queued = out.get("queued") or []
    console.print(f"{out['runs'] - len(queued)} runs published to {out['warehouse']}", soft_wrap=True, markup=False)
    if queued:  # trained and kept on disk, not lost: the warehouse was held by another process
        from .publishing import pending_dir

        print(f"warning: the warehouse {out['warehouse']} was busy: {len(queued)} trained run(s) are queued in "
              f"{pending_dir(out['warehouse'])}; `eventatlas publish --pending` lands them (so does the next flow)",
              file=sys.stderr, flush=True)
        return
    if out.get("report"):
        console.print(f"results report: {out['report']}", soft_wrap=True, markup=False)
    _leaderboard(run_ids=_run_ids(out))


def _run_ids(flow_out: dict) -> list[str]:
    """The run ids of a train-all result (its run records)."""
    from .records import read_record

    return [read_record(r)["run"]["run_id"] for r in flow_out.get("records") or []]


@app.command()
def train(
    method: str = typer.Argument(..., help="method name (`eventatlas methods` lists them)"),
    dataset: str = typer.Argument(..., help="ingested dataset name (or a dataset directory)"),
    seed: int = typer.Option(0, "--seed"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON config of the method, e.g. "
                                         '\'{"train": {"epochs": 3}}\''),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    resume: bool = typer.Option(False, "--resume", help="continue the unfinished run of this configuration"),
) -> None:
    """One run without Prefect (also under `accelerate launch` / `torchrun` for data-parallel training).

    Writes the run record under <data>/runs/<run_id>/ and prints its path; land it in the warehouse
    with `eventatlas publish <path>`."""
    from .device import resolve_device
    from .methods import get_spec

    try:
        p = json.loads(params) if params else {}
        get_spec(method).validate(p)
        resolve_device(device)
    except ValueError as e:  # bad JSON, ParamError and DeviceUnavailable are ValueErrors
        _fail(str(e), code=2)
    ddir = Path(dataset) if Path(dataset).is_dir() else config.datasets_dir() / dataset
    if not (ddir / "manifest.json").exists():
        _fail(f"dataset {dataset!r} is not ingested (no {ddir / 'manifest.json'}); see `eventatlas datasets`",
              code=2)
    from .records import read_record
    from .runner import run_method

    path = run_method(method, ddir, seed=seed, params=p, device=device, resume=resume, flow="cli-train")
    if int(os.environ.get("RANK", "0")) == 0:
        run = read_record(path)["run"]
        console.print(f"{run['status']}: {path}" + (f" ({run['error']})" if run.get("error") else ""), markup=False,
                      soft_wrap=True)
        if run["status"] == "failed":
            raise typer.Exit(1)


@app.command()
def methods() -> None:
    """The methods train-all can run: dataset kinds, GPU need, tasks and every --params key."""
    from .methods import SPECS

    for name, spec in SPECS.items():
        console.print(f"[bold]{escape(name)}[/bold]: {escape(spec.description)}")
        console.print(f"  applies to: {', '.join(sorted(spec.applies_to))}; tasks: {', '.join(spec.tasks)}; "
                      f"GPU: {spec.gpu}", markup=False)
        cls = spec.config_class()
        for key, f in cls.model_fields.items():
            ann = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
            default = f.default_factory() if f.default_factory else f.default
            if hasattr(default, "model_dump"):
                default = "{" + ", ".join(f"{k}: {v}" for k, v in default.model_dump().items()) + "}"
            console.print(f"    {key}: {ann} = {default!r}" if not isinstance(default, str) or not default.startswith("{")
                          else f"    {key}: {default}", markup=False)


@app.command("extract-events")
def extract_events_cmd(
    source: str = typer.Argument(..., help="ingested dataset name (or directory) whose sentences are parsed"),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="name of the new event-co-occurrence dataset "
                                          "(default: <source>_svo)"),
    parser: str = typer.Option("en_core_web_sm", "--parser", help="an installed spaCy pipeline by package name or "
                               "directory (spacy:<name or path>, or just the name or path), or import:<module>:<function> "
                               "for any other Parser"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="default: <data>/datasets/<dataset>"),
) -> None:
    """(subject, verb, object) events from the sentences of an ingested dataset, by dependency parse, into a
    dataset SWCC trains on (`eventatlas train swcc <dataset>`); prints the counts."""
    from .swcc.extract import load_parser, sentences_by_document, write_extracted

    sdir = Path(source) if Path(source).is_dir() else config.datasets_dir() / source
    if not (sdir / "mentions.parquet").exists():
        _fail(f"dataset {source!r} is not ingested (no {sdir / 'mentions.parquet'}); see `eventatlas datasets`", code=2)
    name = dataset or f"{sdir.name}_svo"
    try:
        parse = load_parser(parser)
    except (ValueError, RuntimeError) as e:
        _fail(str(e), code=2)
    man = write_extracted(sentences_by_document(sdir), parse, out_dir or config.datasets_dir() / name, dataset=name,
                          source=str(sdir), parser=parser)
    console.print(json.dumps({"dataset": name, "parser": parser, **man["stats"]}), markup=False, soft_wrap=True)


@app.command("build-wikievents")
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
        from .wiki.http import is_contact

        who = contact or os.environ.get("EVENTATLAS_CONTACT")
        if not (is_contact(who) or (not who and is_contact(os.environ.get("EVENTATLAS_USER_AGENT")))):
            _fail("build-wikievents --backend api needs a contact for the User-Agent (Wikimedia policy): pass "
                  f"--contact <URL or e-mail> or set EVENTATLAS_CONTACT{f' ({who!r} is neither)' if who else ''}", code=2)
    if backend == "api":
        api = {"root": root, "client_options": {"contact": contact, "cache_dir": str(config.cache_dir() / "http")},
               "checkpoint": str(config.cache_dir() / "wiki-crawl" / (root or "all"))}
    from flows.build_wikievents import build_wikievents as flow

    with _prefect_guard():
        man = flow(backend=backend, dumps=layout, api=api, out_dir=str(out_dir) if out_dir else None,
                   languages=_split(languages), params=p)
    console.print(json.dumps({k: man.get(k) for k in ("build_id", "rows", "rejects") if k in man}, indent=1, default=str),
                  markup=False)


# Metrics shown per task when --metrics is not given (those present in the warehouse).
# the headline metrics per task, and which metrics are not fractions (shown as they are, others x100)
from .evaluation.base import DEFAULT_METRICS  # noqa: E402
from .evaluation.base import NOT_FRACTION as _NOT_FRACTION  # noqa: E402


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _of_runs_sql(run_ids: list[str]) -> str:
    """A WHERE condition on the ``leaderboard`` view: configurations the runs ``run_ids`` have metrics for."""
    same = " AND ".join(f"m.{c} IS NOT DISTINCT FROM leaderboard.{c}" for c in
                        ("task", "dataset", "split", "setting", "method", "representation", "clustering", "variant",
                         "metric"))
    return f"EXISTS (SELECT 1 FROM metrics m WHERE m.run_id IN ({', '.join('?' * len(run_ids))}) AND {same})"


def leaderboard_sql(metrics: list[str], dataset: Optional[str] = None, task: Optional[str] = None,
                    lower_is_better: bool = False, run_ids: Optional[list[str]] = None) -> tuple[str, list]:
    """Pivot of the ``leaderboard`` view: one line per configuration (task, dataset, setting, method,
    representation, clustering, variant), best value per metric (x100 for fractions), sorted by the
    first metric, whose mean and std over seeds come first. Metric names travel as parameters.
    ``run_ids``: only the configurations those runs produced (over all their seeds)."""
    if not metrics:
        raise ValueError("leaderboard_sql: no metric")

    def agg(fn: str, m: str) -> str:
        return f"max({fn}) FILTER (WHERE metric = ?)" if _NOT_FRACTION.search(m) else \
            f"100 * max({fn}) FILTER (WHERE metric = ?)"

    first = metrics[0]
    cols = [f"round({agg('mean', first)}, 1) AS {_ident(first + '_mean')}",
            f"round({agg('std', first)}, 1) AS {_ident(first + '_std')}",
            *[f"round({agg('best', m)}, 1) AS {_ident(m)}" for m in metrics]]
    args: list = [first, first, *metrics]
    where = [c for c, v in (("task = ?", task), ("dataset = ?", dataset)) if v]
    args += [v for v in (task, dataset) if v]
    if run_ids is not None:
        where.append(_of_runs_sql(run_ids) if run_ids else "false")
        args += list(run_ids)
    sql = (f"SELECT task, dataset, setting, method, representation AS rep, clustering, variant, "
           f"max(n_seeds) AS seeds, {', '.join(cols)} FROM leaderboard"
           + (f" WHERE {' AND '.join(where)}" if where else "")
           + " GROUP BY ALL HAVING max(best) FILTER (WHERE metric = ?) IS NOT NULL"
           f" ORDER BY task, dataset, {_ident(first)} {'ASC' if lower_is_better else 'DESC'} NULLS LAST,"
           " method, rep, clustering, variant")
    return sql, [*args, first]


def _distinct(wh, column: str, task: Optional[str] = None, dataset: Optional[str] = None) -> list[str]:
    where = [f"{column} IS NOT NULL", *[c for c, v in (("task = ?", task), ("dataset = ?", dataset)) if v]]
    _, rows = wh.query_rows(f"SELECT DISTINCT {column} FROM leaderboard WHERE {' AND '.join(where)} ORDER BY 1",
                            [v for v in (task, dataset) if v])
    return [r[0] for r in rows]


def _check_known(what: str, values: list[str], known: list[str], wh) -> None:
    unknown = [v for v in values if v not in known]
    if unknown:
        _fail(f"unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; known in {wh.path}: "
              f"{', '.join(known) if known else '(none: no completed run has metrics)'}", code=2)


def _leaderboard(metrics: Optional[str] = None, dataset: Optional[str] = None, task: Optional[str] = None,
                 run_ids: Optional[list[str]] = None) -> None:
    """One table per task (or only ``task``); unknown task / dataset / metric names fail with the known ones.
    ``run_ids``: only the rows of the configurations those runs produced (what train-all / demo just ran)."""
    from .warehouse import Warehouse, WarehouseError

    wh = Warehouse()
    requested = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    try:
        if task:
            _check_known("task", [task], _distinct(wh, "task"), wh)
        if dataset:
            _check_known("dataset", [dataset], _distinct(wh, "dataset", task), wh)
        if requested:
            _check_known("metric", requested, _distinct(wh, "metric", task, dataset), wh)
        tasks = [task] if task else _distinct(wh, "task", dataset=dataset)
        if run_ids is not None:
            _, produced = wh.query_rows(f"SELECT DISTINCT task FROM metrics WHERE run_id IN "
                                        f"({', '.join('?' * len(run_ids))})", list(run_ids)) if run_ids else (None, [])
            tasks = [t for t in tasks if t in {r[0] for r in produced}]
            if not tasks:
                console.print("the runs produced no metrics (see `eventatlas sql \"SELECT run_id, status, error FROM "
                              "runs ORDER BY started_at DESC\"`)", soft_wrap=True, markup=False)
                return
        if not tasks:
            console.print(f"the leaderboard in {wh.path} is empty: no completed run has metrics yet", soft_wrap=True, markup=False)
            return
        for t in tasks:
            known = _distinct(wh, "metric", t, dataset)
            chosen = [m for m in (requested or DEFAULT_METRICS.get(t, ())) if m in known]
            if not chosen and not requested:
                chosen = known[:3]
            if not chosen:
                continue  # none of the requested metrics exists for this task
            _, lower = wh.query_rows("SELECT 1 FROM metric_direction WHERE metric = ? AND NOT higher_is_better",
                                     [chosen[0]])
            sql, args = leaderboard_sql(chosen, dataset, t, lower_is_better=bool(lower), run_ids=run_ids)
            cols, rows = wh.query_rows(sql, args)
            if run_ids is not None and not rows:
                continue
            scope = f"rows of the {len(run_ids)} runs just produced, " if run_ids is not None else ""
            print_rows(cols, rows, title=f"{t} leaderboard from {wh.path} ({scope}best over seeds; fractions x100)")
    except WarehouseError as e:
        _fail(str(e))


@app.command()
def leaderboard(
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          help="comma-separated metrics; the first one sorts and gets mean/std over "
                                               "seeds (default per task, e.g. ari,bcubed_f,nmi for induction)"),
    dataset: Optional[str] = typer.Option(None, "--dataset"),
    task: Optional[str] = typer.Option(None, "--task", help="induction, naming, linking, ... (default: every task, "
                                                            "one table each)"),
) -> None:
    """Best value per task x dataset x setting x method x representation x clustering x variant
    (mean/std over seeds of the first metric), from DuckDB."""
    _leaderboard(metrics, dataset, task)


@app.command()
def report(
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="the HTML file to write"),
) -> None:
    """Write the results report: one self-contained HTML page (works offline) from the warehouse: leaderboard
    per task and dataset (mean ± std over seeds, best marked), metric bars, learning curves, run table."""
    from .report import write_report
    from .warehouse import WarehouseError

    try:
        path = write_report(out)
    except WarehouseError as e:
        _fail(str(e))
    console.print(f"report written to {path.resolve()}", soft_wrap=True, markup=False)


@app.command()
def publish(
    paths: Optional[List[Path]] = typer.Argument(None, help="run.json files, run directories, or directories "
                                                 "searched recursively for run.json"),
    pending: bool = typer.Option(False, "--pending", help="land the runs queued while the warehouse was busy "
                                 "(every publish does this first; alone, it is all this command does)"),
) -> None:
    """Publish run records written outside a flow (e.g. by `python -m eventatlas.methods.batch_attention_posthoc evaluate`)
    to the warehouse, after the runs queued for it. Without a Prefect API (PREFECT_API_URL) this runs the publish
    core directly; with one, the `publish` flow (the warehouse's one writer either way)."""
    from .publishing import pending_dir, pending_runs
    from .records import RecordError, find_records, read_record
    from .warehouse import WarehouseError

    if not paths and not pending:
        _fail("give run records to publish (PATH...) and/or --pending", code=2)
    try:  # bad paths fail before anything starts
        records = find_records(paths or [])
        for r in records:
            read_record(r)
    except RecordError as e:
        _fail(str(e), code=2)
    waiting = len(pending_runs(config.warehouse_path()))
    try:
        if use_prefect():
            from flows.publish import publish as flow

            with _prefect_guard():
                out = flow([str(r) for r in records])
        else:
            from .publishing import publish_records

            out = publish_records(records, warn=print_warning).as_dict()
    except (RecordError, WarehouseError) as e:
        _fail(str(e))
    n = len(out["published"]) + len(out["skipped"]) + len(out["failed"])
    console.print(f"published {n} run records "
                  f"({len(out['published'])} completed, {len(out['skipped'])} skipped, {len(out['failed'])} failed; "
                  f"{out['metric_rows']} metric rows; {len(out.get('from_queue', []))} of {waiting} queued) "
                  f"to {out['warehouse']}", soft_wrap=True, markup=False)
    if out.get("builds_from_queue"):
        console.print(f"recorded {len(out['builds_from_queue'])} queued wiki build(s): "
                      f"{', '.join(out['builds_from_queue'])}", soft_wrap=True, markup=False)
    if out.get("queued"):
        _fail(f"warehouse {out['warehouse']} is busy: {len(out['queued'])} run(s) stay queued in "
              f"{pending_dir(out['warehouse'])}; run `eventatlas publish --pending` when it is free", code=1)


@app.command()
def search(
    dataset: str = typer.Option(..., "--dataset", help="ingested corpus to search (its mentions)"),
    examples: Path = typer.Option(..., "--examples", help="JSON lines: a sentence with its trigger in [brackets] "
                                  "(a string or {\"text\": ...}) or {\"mention_id\": ...}"),
    model: str = typer.Option("adhoc", "--model", help="adhoc (mean cosine) | siamese (trained on the examples now) | "
                              "meta:<run id> (a network an emr run meta-trained on other types)"),
    top: int = typer.Option(50, "--top", help="results to show"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="also write the results (.csv or .parquet)"),
    representation: str = typer.Option("window4", "--representation", "-r"),
    encoder: Optional[str] = typer.Option(None, "--encoder", help="HF id or local path (default all-MiniLM-L6-v2)"),
    epochs: int = typer.Option(50, "--epochs", help="siamese: training epochs"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Few-shot event mention retrieval: rank a corpus's mentions by similarity to a few examples."""
    from .emr.search import SearchError
    from .emr.search import search as run_search

    if output is not None and output.suffix.lower() not in (".csv", ".parquet"):
        _fail(f"--output {output}: give a .csv or .parquet path", code=2)
    _check_device(device)
    ddir = Path(dataset) if Path(dataset).is_dir() else config.datasets_dir() / dataset
    bar = None
    try:
        kw: dict[str, Any] = {}
        if model == "siamese":
            from tqdm.auto import tqdm

            from .emr.models import SiameseParams

            bar = tqdm(total=epochs, desc="siamese", unit="epoch")
            kw = {"siamese": SiameseParams(epochs=epochs),
                  "on_epoch": lambda done, total: bar.update(done - bar.n)}
        table = run_search(ddir, examples, model=model, top=top, model_id=encoder, representation=representation,
                           device=device, seed=seed, **kw)
    except (SearchError, FileNotFoundError) as e:  # bad input: examples, dataset, --model
        _fail(str(e), code=2)
    finally:
        if bar is not None:
            bar.close()
    rows = []
    for r in table.to_pylist():
        a, b, s = r["trigger_start"], r["trigger_end"], r["sentence"]
        text = f"{escape(s[:a])}[bold magenta]{escape(s[a:b])}[/bold magenta]{escape(s[b:])}"
        rows.append((r["rank"], round(r["score"], 4), text, r["doc_id"], ", ".join(r["labels"] or [])))
    t = Table(title=f"{dataset}: top {len(rows)} for {examples} ({model})")
    for c in ("rank", "score", "sentence", "doc_id", "labels"):
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*[str(x) for x in row])
    console.print(t)
    if output is not None:
        from .io import atomic_path, write_parquet

        if output.suffix.lower() == ".parquet":
            write_parquet(table, output)
        else:
            import pyarrow as pa
            import pyarrow.csv as pcsv

            labels = pa.array(["|".join(x or []) for x in table["labels"].to_pylist()], pa.string())
            output.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(output) as tmp:  # nothing half-written
                pcsv.write_csv(table.set_column(table.schema.get_field_index("labels"), "labels", labels), tmp)
        console.print(f"wrote {len(rows)} results to {output}", markup=False)


@app.command()
def ground(
    dataset: str = typer.Option(..., "--dataset", help="grounding dataset whose events are the candidates"),
    run: str = typer.Option(..., "--run", help="run id of a finished `grounding` run (or its directory)"),
    text: str = typer.Option(..., "--text", help='text with the mention in [brackets], e.g. "Police [arrested] him."'),
    variant: Optional[str] = typer.Option(None, "--variant", help="bi-encoder variant (default: the run's best on dev)"),
    top: int = typer.Option(8, "--top", help="candidates shown (bi-encoder only)"),
    device: str = typer.Option("cpu", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Ground a marked mention to a set of events (hierarchical event grounding): the bi-encoder's
    ranking, rescored by the run's cross-encoder when it has one (predicted = score >= tau_c)."""
    from .grounding.link import GroundError, ground_text

    _check_device(device)
    ddir = Path(dataset) if Path(dataset).is_dir() else config.datasets_dir() / dataset
    rdir = Path(run) if Path(run).is_dir() else config.runs_dir() / run
    try:
        out = ground_text(ddir, rdir, text, variant=variant, top=top, device=device)
    except GroundError as e:  # bad input: text, run, dataset, --variant
        _fail(str(e), code=2)
    how = f"cross-encoder, tau_c = {out['tau_c']:.2f}" if out["cross"] else f"bi-encoder {out['variant']}, top {top}"
    pred = {r["type_id"] for r in out["predicted"]}
    t = Table(title=f"{out['mention']!r}: {len(pred) or 'no'} event(s) predicted ({how})")
    for c in ("predicted", "score", "event", "name"):
        t.add_column(c, overflow="fold")
    for r in out["ranked"]:
        t.add_row("*" if r["type_id"] in pred else "", f"{r['score']:.4f}", r["type_id"], r["name"])
    console.print(t)
    if out["cross"] and not pred:
        console.print("NULL: no candidate reaches tau_c", markup=False)


@app.command()
def sql(query: str = typer.Argument(..., help="SQL over the warehouse tables and views (read-only)")) -> None:
    """Run a read-only SQL query against the warehouse and print a table."""
    import duckdb

    from .warehouse import Warehouse, WarehouseError

    try:
        cols, rows = Warehouse().query_rows(query)
    except duckdb.Error as e:  # the query itself is the bad input (syntax, a write on the read-only view)
        _fail(str(e), code=2)
    except WarehouseError as e:
        _fail(str(e))
    print_rows(cols, rows)


@app.command()
def runs(
    status: Optional[str] = typer.Option(None, "--status", help="completed, failed, skipped, ..."),
    flow: Optional[str] = typer.Option(None, "--flow", help="ingest, train-all, train, ..."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="newest N runs"),
) -> None:
    """The newest runs in the warehouse (ingests and trainings; a failed run's error is one line, its
    traceback in the file the line names)."""
    import duckdb

    from .warehouse import Warehouse, WarehouseError

    where, args = [], []
    for col, val in (("status", status), ("flow", flow)):
        if val:
            where.append(f"{col} = ?")
            args.append(val)
    q = ("SELECT run_id, flow, method, status, started_at, error FROM runs"
         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY started_at DESC NULLS LAST, run_id LIMIT ?")
    try:
        cols, rows = Warehouse().query_rows(q, [*args, limit])
    except (duckdb.Error, WarehouseError) as e:
        _fail(str(e))
    print_rows(cols, rows)


DEMO_ROOT_ENV = "EVENTATLAS_DEMO_ROOT"


def demo_root() -> Path:
    """The demo's own data root (``EVENTATLAS_DEMO_ROOT``, default ``<data root>/demo``)."""
    return Path(os.environ.get(DEMO_ROOT_ENV) or config.data_root() / "demo")


@app.command()
def demo(
    root: Optional[Path] = typer.Option(None, "--root", help="the demo's data root (default <data root>/demo, "
                                        f"or ${DEMO_ROOT_ENV}); its warehouse is <root>/eventatlas.duckdb"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON {method: {param: value}} as for train-all"),
) -> None:
    """Ingest the shipped samples into the demo's own data root, run `train-all` there with its defaults
    and print the leaderboard of those runs. Datasets you ingested elsewhere are not touched or trained on;
    the embedding cache is shared (content-keyed)."""
    from .methods import ParamError, validate_params

    try:
        p = json.loads(params) if params else None
        validate_params(p, ["untuned"])
    except (ValueError, ParamError) as e:
        _fail(f"bad --params: {e}", code=2)
    root = (root or demo_root()).resolve()
    env = {"EVENTATLAS_DATA": str(root), "EVENTATLAS_WAREHOUSE": str(root / "eventatlas.duckdb"),
           "EVENTATLAS_CACHE": str(config.cache_dir().resolve())}
    console.print(f"demo data root: {root} (datasets, runs; warehouse {env['EVENTATLAS_WAREHOUSE']}); "
                  f"embedding cache {env['EVENTATLAS_CACHE']}", soft_wrap=True, markup=False)
    from unittest import mock

    with mock.patch.dict(os.environ, env):  # the demo's root for this command only
        from flows.train_all import train_all as flow

        from .ingest import ingest_samples as run_samples

        mans = run_samples()
        mans = list(mans.values()) if isinstance(mans, dict) else list(mans)
        console.print(f"ingested {len(mans)} sample datasets into {config.datasets_dir()}", markup=False)
        with _prefect_guard():
            out = flow(params=p)
        console.print(f"train-all: {out['runs']} runs published to {out['warehouse']}", markup=False)
        _leaderboard(run_ids=_run_ids(out))
        console.print(f"look closer: EVENTATLAS_DATA={root} EVENTATLAS_WAREHOUSE={env['EVENTATLAS_WAREHOUSE']} "
                      "eventatlas sql \"SELECT ...\"", soft_wrap=True, markup=False)


def main() -> Any:  # pragma: no cover - console entry point
    return app()


if __name__ == "__main__":  # pragma: no cover
    app()
