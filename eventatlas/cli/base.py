"""The ``eventatlas`` command line's base: the app, its error and exit-code contract, and printing helpers.

Commands live by group in ``data`` (datasets in and out), ``train`` (methods, embeddings, clusters,
the demo), ``results`` (warehouse reads, the report, publishing) and ``tools`` (search, grounding).
Exit codes: 0 ok; 2 bad input (usage errors, unknown command/option/name, bad files, bad run records) as
one ``error:`` line; 1 a failure that is not the input's: the environment (a full disk or exceeded quota:
one line naming the file, nothing half-written left; a busy warehouse: the runs wait queued) or an
internal failure (one ``internal failure:`` line, the traceback with --debug). Names (methods, datasets,
readers, runs) are checked against the registry / data root first, so a typo is refused in well under a
second: Prefect and torch are imported only inside the commands that need them.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Iterable, List, NoReturn, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

try:  # typer >= 0.16 vendors click: its usage errors are not click's classes
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - typer with a click dependency
    import click.exceptions as _click_errors

from .. import config
from ..names import did_you_mean

console = Console(width=max(120, Console().width))  # tables stay readable when piped
_DEBUG = {"on": False}
_GIVEN: set[str] = set()  # the path options of this command given on its line (root, warehouse): no fallback


def _bad_input_types() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the input is wrong" (exit 2), as opposed to an internal failure (exit 1)."""
    from ..errors import InputError

    return (InputError, FileNotFoundError, IsADirectoryError, NotADirectoryError)


def error_line(e: BaseException) -> str:
    """The one-line text of an error: ``<file>:<line or record>: <what>`` for InputError (its str),
    ``<file>: <reason>`` for OS errors on a named file, a full disk as such (whoever raised it), else
    ``internal failure: <Type>: <message>``."""
    from ..io import DiskFull, is_disk_full  # only on the way out: the happy path does not import pyarrow

    if is_disk_full(e):
        what = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else \
            (str(e).strip().splitlines() or [type(e).__name__])[0]
        left = " (nothing was replaced, no temporary file is left)" if isinstance(e, DiskFull) else ""
        return f"{what}{left}; free disk space (or quota) and run the command again"
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


def _fail(msg: str, code: int = 1) -> NoReturn:
    # one line on stderr however long (paths), printed literally (brackets are text); exit 2 = bad input
    print_error(msg)
    raise typer.Exit(code)


def _usage_line(e: Exception) -> str:
    """A click usage error as one line, with where to look (``eventatlas train --help``)."""
    ctx = getattr(e, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return f"{e.format_message()}{where}"


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
_PASS_THROUGH = (typer.Exit, typer.Abort, _click_errors.NoArgsIsHelpError, SystemExit, KeyboardInterrupt)


# `eventatlas --help` lists the commands by panel, in this order (each command names its panel: rich_help_panel)
PANEL_DATA = "Data"
PANEL_TRAIN = "Train and models"
PANEL_RESULTS = "Results"
PANEL_ATLAS = "Atlas, discovery and search"
PANEL_OPS = "Demo and operations"
HELP_PANELS = (PANEL_OPS, PANEL_DATA, PANEL_TRAIN, PANEL_RESULTS, PANEL_ATLAS)


class _ErrorsAsLines(TyperGroup):
    """Every command: a usage error (unknown command or option, missing argument, bad value) or bad
    input -> ``error: <what>`` on stderr, exit 2; any other uncaught exception -> one ``error:`` line, exit 1
    (``<file>: No space left on device ...`` for a full disk, else ``internal failure: ...``); tracebacks only
    with --debug."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:  # the group's own options (`eventatlas --bogus`)
            return super().parse_args(ctx, args)
        except _PASS_THROUGH:
            raise
        except _click_errors.ClickException as e:
            print_error(_usage_line(e))
            raise typer.Exit(e.exit_code) from None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands by panel (:data:`HELP_PANELS`), each with its short help whole (wrapped, never cut
        with "...")."""
        try:
            from typer._click.utils import make_default_short_help
        except ImportError:  # pragma: no cover - typer with a click dependency
            from click.utils import make_default_short_help

        panels: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            # no short_help: the help's first sentence, up to its first ';'
            short = cmd.short_help or make_default_short_help(cmd.help or "", 10 ** 6).split("; ")[0]
            panels.setdefault(getattr(cmd, "rich_help_panel", None) or "Commands", []).append((name, short))
        wide = max((len(n) for rows in panels.values() for n, _ in rows), default=0)  # one column for all panels
        for panel in [*(p for p in HELP_PANELS if p in panels), *(p for p in panels if p not in HELP_PANELS)]:
            with formatter.section(panel):
                formatter.write_dl([(n.ljust(wide), h) for n, h in panels[panel]])

    def invoke(self, ctx: Any) -> Any:
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            lg = logging.getLogger(name)
            if _FILTER not in lg.filters:
                lg.addFilter(_FILTER)
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except _click_errors.ClickException as e:  # usage errors carry exit code 2
            print_error(_usage_line(e))
            raise typer.Exit(e.exit_code) from None
        except Exception as e:  # noqa: BLE001 - the CLI boundary: one line instead of a traceback
            if _DEBUG["on"]:
                traceback.print_exc()
            print_error(error_line(e))
            raise typer.Exit(2 if isinstance(e, _bad_input_types()) else 1) from None


# rich_markup_mode=None: help text is printed as written (`[trigger]`, `[NAME=]HEX` keep their brackets)
app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_ErrorsAsLines, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="eventatlas: event datasets in one schema, baselines, metrics and a DuckDB warehouse. "
                       "Exit codes: 0 ok, 2 bad input (an unknown command, option or name, or a bad file: one "
                       "line naming it), 1 a failure of the environment (a full disk: one line naming the file) "
                       "or an internal one.")

for _k, _v in (("PREFECT_SERVER_ANALYTICS_ENABLED", "false"), ("HF_HUB_OFFLINE", "1"),
               ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false"),
               ("PREFECT_LOGGING_EXTRA_LOGGERS", "eventatlas"),
               # the temporary API server's 20 s default start-up budget fails on a loaded machine
               ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")):
    os.environ.setdefault(_k, _v)


@app.callback()
def _main(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "-v", "--verbose", help="show Prefect logs, library progress bars and "
                                 "warnings (default: quiet; eventatlas's own progress stays)"),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks (and Prefect's logs of failed runs) for "
                               "errors; without it an error is one line on stderr"),
    warehouse: Optional[Path] = typer.Option(None, "--warehouse", metavar="PATH",
                                             help="the DuckDB warehouse every command reads and writes (sets "
                                                  "EVENTATLAS_WAREHOUSE for this command; e.g. data/demo/eventatlas."
                                                  "duckdb, the demo's)"),
    root: Optional[Path] = typer.Option(None, "--root", metavar="PATH",
                                        help="the data root (datasets, runs) every command reads and writes (sets "
                                             "EVENTATLAS_DATA for this command; the cache stays), with its warehouse "
                                             "PATH/eventatlas.duckdb when that file exists and --warehouse is not "
                                             "given; e.g. data/demo, the demo's"),
) -> None:
    from ..verbosity import set_verbosity

    _DEBUG["on"] = debug
    set_verbosity(verbose or debug)
    if warehouse is not None and warehouse.is_dir():
        _fail(f"--warehouse {warehouse}: a directory; give the DuckDB file (e.g. {warehouse}/eventatlas.duckdb)",
              code=2)
    if root is not None and root.exists() and not root.is_dir():
        _fail(f"--root {root}: not a directory; give a data root (e.g. data/demo)", code=2)
    # the command's settings, resolved once; flows and workers started from here get them too
    settings = config.Settings.resolve(**({"warehouse": warehouse} if warehouse is not None else {}))
    if root is not None:  # the root's own warehouse when it has one (the demo's layout); the cache stays shared
        own = Path(root) / "eventatlas.duckdb"
        settings = settings.with_(data_root=root, cache=settings.cache,
                                  **({"warehouse": own} if warehouse is None and own.is_file() else {}))
    _GIVEN.clear()
    _GIVEN.update(name for name, v in (("root", root), ("warehouse", warehouse)) if v is not None)
    ctx.call_on_close(_GIVEN.clear)
    active = contextlib.ExitStack()
    active.enter_context(config.use(settings))
    ctx.call_on_close(active.close)


def root_content(data_root: Path, warehouse: Optional[Path]) -> tuple[int, int, bool]:
    """(ingested datasets, run directories, whether ``warehouse`` is a file) of a data root: counted, nothing
    opened or imported."""
    datasets = sum(1 for _ in (data_root / "datasets").glob("*/manifest.json"))
    try:
        runs = sum(1 for p in (data_root / "runs").iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:  # no runs directory (yet)
        runs = 0
    return datasets, runs, warehouse is not None and warehouse.is_file()


def _counted(content: tuple[int, int, bool]) -> str:
    n_ds, n_runs, wh = content
    text = f"{n_ds} dataset{'' if n_ds == 1 else 's'}, {n_runs} run{'' if n_runs == 1 else 's'}"
    return text + ("" if wh else ", no warehouse")


def shown_path(path: Path) -> str:
    """``path`` as the user types it: relative to the working directory when it lies under it, else absolute."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _demo_and_mine() -> Optional[tuple[tuple[int, int, bool], tuple[int, int, bool]]]:
    """What the demo's root and the user's have (:func:`root_content`), or None when no fallback applies: --root
    or --warehouse given, or the user's data root is the demo's. A warehouse set to the demo's is not the user's."""
    s = config.current()
    if _GIVEN or s.data_root == s.demo_root:
        return None
    demo_wh = s.demo_root / "eventatlas.duckdb"
    return root_content(s.demo_root, demo_wh), root_content(s.data_root, None if s.warehouse == demo_wh else s.warehouse)


def reads_demo() -> bool:
    """Whether a read command reads the demo's root now (:func:`read_root`'s fallback): no --root or --warehouse,
    nothing in the user's data root (no dataset, run or warehouse), something in the demo's."""
    both = _demo_and_mine()
    return both is not None and any(both[0]) and not any(both[1])


def read_root(*, warehouse: bool = True) -> Path:
    """The one rule of every read command (datasets, models, runs, leaderboard, report, sql, evaluate, search,
    atlas show / export) for where it reads; returns the warehouse. ``--root`` / ``--warehouse`` given: those,
    silently. Else the user's data root and warehouse as configured (``EVENTATLAS_DATA``,
    ``EVENTATLAS_WAREHOUSE``, the defaults) while the root has anything (an ingested dataset, a run directory or
    the warehouse file), with one ``note:`` line on stderr naming the demo's root and ``--root`` to read it
    when the demo's has something too; else the demo's root with its warehouse (``<demo root>/eventatlas.duckdb``)
    for this command, said in one ``note:`` line. Nothing to read (``warehouse``: no warehouse file; else
    nothing in the root): exit 2, one line saying how to get data. Commands that write never call this."""
    s = config.current()
    demo_root, demo_wh = s.demo_root, s.demo_root / "eventatlas.duckdb"
    both = _demo_and_mine()
    if both is not None:
        demo, mine = both
        if any(demo) and not any(mine):
            config.switch(data_root=demo_root, warehouse=demo_wh, cache=s.cache, demo_root=demo_root)
            _note(f"nothing in your data root {shown_path(s.data_root)} yet (no dataset, run or warehouse "
                  f"{shown_path(s.warehouse)}); reading the demo's, {shown_path(demo_root)} ({_counted(demo)}; "
                  "--root PATH reads another)")
        elif any(demo):
            _note(f"reading your data root {shown_path(s.data_root)} ({_counted(mine)}); the demo's "
                  f"({_counted(demo)}) is at {shown_path(demo_root)}: --root {shown_path(demo_root)}")
    s = config.current()
    if warehouse and not s.warehouse.exists():
        _fail(f"no warehouse at {s.warehouse}: `make demo` makes one on the samples, any flow or `eventatlas migrate` "
              "makes this one; --root PATH or --warehouse PATH names another", code=2)
    if not warehouse and not any(root_content(s.data_root, s.warehouse)):
        _fail(f"nothing in data root {s.data_root} (no dataset, run or warehouse {s.warehouse}): `make demo` runs "
              "the demo on the samples, `eventatlas ingest-samples` or `eventatlas ingest` adds data; --root PATH "
              "names another", code=2)
    return s.warehouse


def _note(msg: str) -> None:
    print(f"note: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- names, checked cheaply
def unknown(what: str, name: str, known: Iterable[str], hint: str = "") -> NoReturn:
    """Refuse an unknown name: ``unknown <what> 'x' (did you mean 'y'?); known: ...``, exit 2."""
    known = sorted(known)
    listed = ", ".join(known) if known else "(none)"
    _fail(f"unknown {what} {name!r}{did_you_mean(name, known)}; known: {listed}{hint}", code=2)


def check_method(name: str) -> None:
    from ..methods import SPECS  # the registry: no torch

    if name not in SPECS:
        unknown("method", name, SPECS, " (`eventatlas methods` describes them)")


def ingested_datasets() -> list[str]:
    """Datasets whose manifest landed under the data root."""
    return sorted(p.parent.name for p in config.datasets_dir().glob("*/manifest.json"))


def not_ingested(name: str) -> NoReturn:
    """Refuse a dataset name that is not ingested, with the closest ingested one (exit 2)."""
    have = ingested_datasets()
    _fail(f"dataset {name!r} is not ingested{did_you_mean(name, have)}; ingested under {config.datasets_dir()}: "
          f"{', '.join(have) if have else '(none)'} (`eventatlas ingest` adds one)", code=2)


def dataset_dir(name: str) -> Path:
    """An ingested dataset by name (or a dataset directory); unknown -> exit 2 with the closest name."""
    from ..data.manifest import find_dataset

    try:
        return find_dataset(name)
    except ValueError:
        not_ingested(name)


def run_dir(run: str, *, id_only: bool = False) -> Path:
    """A run by id (or, unless ``id_only``, its directory), as an absolute path; unknown -> exit 2 with the
    closest run id. An id is a name, never a path or a pattern (``*``, ``?``, ``[``, ``/``, ``..``: exit 2)."""
    from ..modeling.saved import bad_run_ref

    if not id_only and Path(run).is_dir():
        return Path(os.path.abspath(run))
    if bad_run_ref(run):
        _fail(f"run {run!r}: {bad_run_ref(run)}; a run is named by its id, without path separators, '..' or "
              "wildcards (`eventatlas runs` lists them)", code=2)
    rdir = config.runs_dir() / run
    if not rdir.is_dir():
        known = sorted(p.name for p in config.runs_dir().glob("*") if p.is_dir()) if config.runs_dir().is_dir() else []
        _fail(f"unknown run {run!r}{did_you_mean(run, known)}: no directory {rdir} (`eventatlas runs` lists them)",
              code=2)
    return rdir


def check_device(device: str) -> None:
    """Refuse an unavailable device before any flow starts."""
    from ..modeling.device import DeviceUnavailable, resolve_device

    try:
        resolve_device(device)
    except DeviceUnavailable as e:
        _fail(str(e), code=2)


# ----------------------------------------------------------------------------- printing
def split(values: Optional[List[str]]) -> Optional[List[str]]:
    """Accept repeated options and comma-separated lists alike."""
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None


def split_seeds(values: Optional[List[str]]) -> Optional[List[int]]:
    """``--seeds`` as integers (repeated or comma-separated); a non-integer, a seed outside
    ``0 <= seed < 2**31``, a repeated seed or too many seeds is a ValueError naming ``--seeds``."""
    from ..experiments.spec import MAX_INT_DIGITS
    from ..tracking.runinfo import MAX_SEEDS, check_seeds

    texts = split(values) or []
    if len(texts) > MAX_SEEDS:
        raise ValueError(f"--seeds: {len(texts)} seeds, at most {MAX_SEEDS}")
    out = []
    for v in texts:
        if len(v) > MAX_INT_DIGITS:  # int() of thousands of digits is slow (and refused), and not a seed anyway
            raise ValueError(f"--seeds: {v[:20]}... ({len(v)} characters) is not a seed (an integer 0 <= seed "
                             "< 2**31)")
        try:
            out.append(int(v))
        except ValueError:
            raise ValueError(f"--seeds: {v!r} is not an integer") from None
    return check_seeds(out, "--seeds") if out else None


def seed_option(value: int) -> int:
    """``--seed``'s check (a typer callback): the bound every seed has (:func:`split_seeds`'s), refused as a
    usage error before anything runs."""
    from ..tracking.runinfo import check_seeds

    try:
        return check_seeds([value], "--seed")[0]
    except ValueError as e:
        raise typer.BadParameter(str(e).removeprefix("--seed: ")) from None


# ----------------------------------------------------------------------------- Prefect, only when asked for
PREFECT_ENTRY_POINTS = "eventatlas.prefect"
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
    """One-shot commands (ingest, publish, ensemble) run through their Prefect flow when a Prefect API is
    configured, else the core directly (no temporary Prefect server: seconds instead of 15-27 s),
    recording the run in the warehouse through the same publish path. ``EVENTATLAS_PREFECT``:
    ``auto`` (default), ``always`` (a temporary server when no API is configured), ``never``."""
    mode = (os.environ.get(PREFECT_MODE_ENV) or "auto").strip().lower()
    if mode not in ("auto", "always", "never"):
        _fail(f"{PREFECT_MODE_ENV}={mode!r}: use auto, always or never", code=2)
    return mode == "always" or (mode == "auto" and prefect_api_configured())


def prefect_flow(name: str) -> Any:
    """The Prefect flow that decorates pipeline ``name``, found through the entry points ``eventatlas.prefect``
    (declared by ``flows/`` in pyproject.toml): the core names a contract, never the flows package."""
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group=PREFECT_ENTRY_POINTS) if e.name == name]
    if not found:
        _fail(f"no Prefect flow {name!r} is installed (entry points {PREFECT_ENTRY_POINTS}): reinstall eventatlas "
              "(`pip install -e .` in a checkout)")
    return found[0].load()


def prefect_guard():
    """Around every flow the CLI runs (`flows.runtime.guarded`): the temporary Prefect server dies with
    this process (kill -9 included), and flow runs of earlier CLI processes that are gone are marked
    crashed first (one warning line each)."""
    return prefect_flow("guard")(print_warning)


def run_flow(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run Prefect flow ``name`` (:func:`prefect_flow`) under :func:`prefect_guard`."""
    flow = prefect_flow(name)
    with prefect_guard():
        return flow(*args, **kwargs)


def wants_prefect(runner: str = "local") -> bool:
    """The one rule for every pipeline command: through its Prefect flow when :func:`use_prefect` says so,
    or when the runner is one of Prefect's task runners (``process``, ``ray``); else in this process
    (``local``, or ``dask`` through Dask itself)."""
    from ..run.scaleout import parse_runner

    return use_prefect() or parse_runner(runner, check_installed=False).kind in ("process", "ray")


def local_engine(runner: str = "local", say: Any = None) -> Any:
    """The in-process engine of the pipelines, printing its lines here."""
    from ..pipelines.local import engine

    return engine(runner, say=say or (lambda m: console.print(m, markup=False, soft_wrap=True, highlight=False)),
                 warn=print_warning)


def main() -> Any:  # pragma: no cover - console entry point
    return app()
