"""The DuckDB warehouse: runs, long-form metrics, artifacts, training logs (per-step losses and
per-epoch dev metrics of trained methods), and views over the Parquet datasets.

One writer. DuckDB lets one process hold a read-write handle on a file, so every write
goes through a short-lived connection opened by :meth:`Warehouse.publish` (or the small
contract helpers built on it) and closed straight after; when another process holds the
lock (any handle: a read-only connection of another process keeps a writer out too) we retry with backoff for a bounded time and then raise :class:`WarehouseLocked`
with a message that says what to do (``eventatlas.store.publishing`` then queues the run on disk
instead of losing it). Queries use read-only connections.

Schema changes are numbered SQL files ``warehouse/migrations/NNN_*.sql`` applied in
order, each in its own transaction, and recorded in ``schema_version``. Numbers 001-099
belong to the core, 1NN to the Wikipedia dataset builder, 2NN to type induction.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

import duckdb
import pyarrow as pa

from .. import config
from ..schema import BENCHMARKS, RUN_VIEWS, TABLES
from ..tracking.tables import TRAIN_EVALS_SCHEMA, TRAIN_STEPS_SCHEMA, TableError, metrics_table, train_log_table

MIGRATIONS_DIR = config.resource_dir("warehouse") / "migrations"
_MIGRATION_RE = re.compile(r"^(\d{3})_[A-Za-z0-9_\-]+\.sql$")
DEFAULT_LOCK_TIMEOUT = 30.0

# What publish accepts as a training log: Arrow table, Parquet path, or rows.
TrainLog = Union[pa.Table, str, os.PathLike, Iterable[Mapping[str, Any]], None]
RUN_FIELDS = (
    "run_id", "flow", "task", "method", "params", "code_version", "data_fingerprints",
    "seed", "started_at", "finished_at", "status", "device", "error",
)
ARTIFACT_FIELDS = ("run_id", "kind", "path", "rows", "sha256")
MODEL_FIELDS = ("run_id", "method", "trained_on", "path", "size_bytes", "parts", "representation", "precision",
                "base_model", "code_version", "created_at")

# One DuckDB database instance per file per process: a read-only and a read-write
# handle on the same file cannot coexist in one process, so serialise them.
_PROCESS_LOCK = threading.RLock()


class WarehouseError(RuntimeError):
    pass


class WarehouseLocked(WarehouseError):
    """Another process holds the DuckDB write lock for longer than the retry budget."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def discover_migrations(directory: Path | None = None) -> list[Migration]:
    """All ``NNN_name.sql`` files, ordered by number; duplicate numbers are an error."""
    directory = Path(directory or MIGRATIONS_DIR)
    found: dict[int, Migration] = {}
    for p in sorted(directory.glob("*.sql")):
        m = _MIGRATION_RE.match(p.name)
        if not m:
            raise WarehouseError(f"{p}: migration files must be named NNN_name.sql")
        v = int(m.group(1))
        if v in found:
            raise WarehouseError(f"{p}: migration number {v:03d} is also used by {found[v].path.name}")
        found[v] = Migration(v, p.stem, p)
    return [found[v] for v in sorted(found)]


@contextlib.contextmanager
def _refused_rows() -> Iterator[None]:
    """Rows that do not fit their table are the warehouse's refusal too: one error type for its callers."""
    try:
        yield
    except TableError as e:
        raise WarehouseError(str(e)) from e


def _sql_str(s: str | os.PathLike) -> str:
    return "'" + str(s).replace("'", "''") + "'"


def _duck_type(t: pa.DataType) -> str:
    """DuckDB type for a pyarrow type (only what eventatlas.schema uses)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _duck_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        inner = ", ".join(f'"{f.name}" {_duck_type(f.type)}' for f in t)
        return f"STRUCT({inner})"
    raise TypeError(f"no DuckDB type for {t}")


def _empty_select(schema: pa.Schema) -> str:
    cols = ", ".join(f'CAST(NULL AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema)
    return f"SELECT {cols} WHERE false"


def _lock_holder(msg: str) -> str:
    m = re.search(r"PID (\d+)", msg)
    return m.group(1) if m else "?"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _json(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


class Warehouse:
    """Handle on the warehouse file. Cheap to create; connections are opened per operation."""

    def __init__(self, path: str | os.PathLike | None = None, *, lock_timeout: float | None = None,
                 migrations_dir: str | os.PathLike | None = None, on_wait: Callable[[str], None] | None = None):
        """``on_wait(holder_pid)`` is called once per connection that finds the file locked by
        another process, before it starts waiting (e.g. to print that it waits and for how long)."""
        self.path = Path(path) if path is not None else config.warehouse_path()
        if lock_timeout is None:
            lock_timeout = float(os.environ.get("EVENTATLAS_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))
        self.lock_timeout = lock_timeout
        self.migrations_dir = Path(migrations_dir) if migrations_dir else MIGRATIONS_DIR
        self.on_wait = on_wait

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r})"

    # -- connections -------------------------------------------------------------------
    @contextlib.contextmanager
    def connect(self, read_only: bool = False,
                config: Mapping[str, Any] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection that waits (bounded, with backoff) for another process's lock; ``config``: DuckDB
        options set when the database opens."""
        if read_only and not self.path.exists():
            raise WarehouseError(
                f"warehouse {self.path} does not exist yet: run `eventatlas migrate` or a flow first"
            )
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with _PROCESS_LOCK:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.05
            told = False
            while True:
                try:
                    con = duckdb.connect(str(self.path), read_only=read_only, config=dict(config or {}))
                    break
                except duckdb.IOException as e:
                    if "lock" not in str(e).lower():
                        raise
                    if not told and self.on_wait is not None and self.lock_timeout > 0:
                        told = True
                        self.on_wait(_lock_holder(str(e)))
                    if time.monotonic() >= deadline:
                        raise WarehouseLocked(
                            f"warehouse {self.path} is locked by another process (pid {_lock_holder(str(e))}?) "
                            f"— stop it or set EVENTATLAS_WAREHOUSE to another file "
                            f"(waited {self.lock_timeout:.0f}s; DuckDB said: {e})"
                        ) from e
                    time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                    delay = min(delay * 2, 2.0)
            try:
                yield con
            finally:
                con.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Read-write connection inside BEGIN/COMMIT; any exception rolls everything back."""
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    # -- schema ------------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply pending migrations in order (idempotent), then :func:`sync_metric_direction`; returns the
        versions applied now."""
        migrations = discover_migrations(self.migrations_dir)
        applied_now: list[int] = []
        with self.connect() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, sha256 VARCHAR, applied_at TIMESTAMP)"
            )
            done = {v: s for v, s in con.execute("SELECT version, sha256 FROM schema_version").fetchall()}
            for m in migrations:
                if m.version in done:
                    continue
                con.execute("BEGIN TRANSACTION")
                try:
                    con.execute(m.path.read_text(encoding="utf-8"))
                    con.execute(
                        "INSERT INTO schema_version VALUES (?, ?, ?, ?)", [m.version, m.name, m.sha256, _now()]
                    )
                except Exception as e:
                    con.execute("ROLLBACK")
                    raise WarehouseError(f"migration {m.path} failed: {e}") from e
                con.execute("COMMIT")
                applied_now.append(m.version)
            views = self.migrations_dir.parent / "views.sql"  # beside the migrations it builds on
            if views.exists():
                con.execute(views.read_text(encoding="utf-8"))
            sync_metric_direction(con)
        return applied_now

    def schema_versions(self) -> list[tuple[int, str]]:
        with self.connect(read_only=True) as con:
            return con.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()

    def refresh_views(self, data_root: str | os.PathLike | None = None) -> dict[str, str]:
        """(Re)create one view per schema table over ``<data_root>/datasets/*/<table>.parquet``.

        A table with no Parquet file yet gets an empty view with the right columns, so
        queries never fail just because nothing was ingested. Returns view -> source.
        """
        root = Path(data_root) if data_root is not None else config.data_root()
        ddir = root / "datasets"
        out: dict[str, str] = {}
        with self.transaction() as con:
            for table, schema in TABLES.items():
                if any(ddir.glob(f"*/{table}.parquet")):
                    pattern = (ddir / "*" / f"{table}.parquet").resolve()
                    src = f"SELECT * FROM read_parquet({_sql_str(pattern)}, union_by_name=true)"
                    out[table] = str(pattern)
                else:
                    src = _empty_select(schema)
                    out[table] = "(empty)"
                con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {src}')
            for view, (glob, schema) in RUN_VIEWS.items():  # runs' own tables, with the run's id
                own = "run_id" in schema.names  # the rows carry it; else it comes from the run's directory
                if any((root / "runs").glob(glob)):
                    pattern = (root / "runs").resolve() / glob
                    src = (f"SELECT * FROM read_parquet({_sql_str(pattern)}, union_by_name=true)" if own else
                           f"SELECT regexp_extract(filename, '([^/\\\\]+)[/\\\\][^/\\\\]+$', 1) AS run_id, "
                           f"* EXCLUDE (filename) FROM read_parquet({_sql_str(pattern)}, union_by_name=true, filename=true)")
                    out[view] = str(pattern)
                else:
                    src = _empty_select(schema if own else pa.schema([pa.field("run_id", pa.string()), *schema]))
                    out[view] = "(empty)"
                con.execute(f'CREATE OR REPLACE VIEW "{view}" AS {src}')
        return out

    # -- writes ------------------------------------------------------------------------
    def publish(self, run: Mapping[str, Any], metrics: Iterable[Mapping[str, Any]] = (),
                artifacts: Iterable[Mapping[str, Any]] = (), *, train_steps: TrainLog = None,
                train_evals: TrainLog = None, benchmarks: TrainLog = None,
                model: Mapping[str, Any] | None = None) -> str:
        """Write one run with its metrics, artifacts and training logs in a single transaction.

        ``train_steps`` / ``train_evals``: an Arrow table, a Parquet path or a list of dicts with
        the columns of :data:`TRAIN_STEPS_SCHEMA` / :data:`TRAIN_EVALS_SCHEMA`; ``benchmarks`` likewise
        with :data:`eventatlas.schema.BENCHMARKS` (a benchmark run's compared figures). ``model``: the saved
        model's row (:data:`MODEL_FIELDS`, :func:`eventatlas.modeling.saved.model_entry`). Re-publishing a
        run_id replaces its rows in every table (so a retried publish is harmless); everything
        is validated before the transaction opens.
        """
        run_id = run.get("run_id")
        if not run_id:
            raise WarehouseError("publish: run has no run_id")
        run_row = [run.get(f) for f in RUN_FIELDS]
        run_row[RUN_FIELDS.index("params")] = _json(run.get("params"))
        run_row[RUN_FIELDS.index("data_fingerprints")] = _json(run.get("data_fingerprints"))
        run_row[RUN_FIELDS.index("status")] = run.get("status") or "completed"
        with _refused_rows():
            mtable = metrics_table(metrics, run_id=run_id)
            logs = {"train_steps": train_log_table(train_steps, TRAIN_STEPS_SCHEMA, "train_steps", run_id),
                    "train_evals": train_log_table(train_evals, TRAIN_EVALS_SCHEMA, "train_evals", run_id),
                    "benchmarks": train_log_table(benchmarks, BENCHMARKS, "benchmarks", run_id)}
        arts = [[run_id if a.get("run_id") is None else a["run_id"], a.get("kind"),
                 None if a.get("path") is None else str(a["path"]), a.get("rows"), a.get("sha256")]
                for a in artifacts]
        model_row = None
        if model:
            if model.get("run_id") not in (None, run_id):
                raise WarehouseError(f"publish: run {run_id}'s model entry names run {model.get('run_id')!r}")
            model_row = [run_id if f == "run_id" else model.get(f) for f in MODEL_FIELDS]
        with self.transaction() as con:
            for t in ("metrics", "artifacts", "train_steps", "train_evals", "benchmarks", "models", "runs"):
                con.execute(f"DELETE FROM {t} WHERE run_id = ?", [run_id])
            con.execute(f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({', '.join('?' * len(RUN_FIELDS))})",
                        run_row)
            _insert_arrow(con, "metrics", mtable)
            if arts:
                con.executemany('INSERT INTO artifacts (run_id, kind, path, "rows", sha256) VALUES (?, ?, ?, ?, ?)',
                                arts)
            for name, table in logs.items():
                if table is not None:
                    _insert_arrow(con, name, table)
            if model_row is not None:
                con.execute(f"INSERT INTO models ({', '.join(MODEL_FIELDS)}) VALUES ({', '.join('?' * len(MODEL_FIELDS))})",
                            model_row)
        return run_id

    # Contract helpers (each its own short transaction) for callers that build a run step by step.
    def start_run(self, run_id: str, **fields: Any) -> str:
        fields.setdefault("started_at", _now())
        fields["status"] = "running"
        with self.transaction() as con:
            row = {"run_id": run_id, **fields}
            row["params"] = _json(row.get("params"))
            row["data_fingerprints"] = _json(row.get("data_fingerprints"))
            cols = [f for f in RUN_FIELDS if f in row]
            con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
            con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [row[c] for c in cols])
        return run_id

    def finish_run(self, run_id: str, status: str = "completed", error: str | None = None,
                   finished_at: datetime | None = None) -> None:
        with self.transaction() as con:
            n = con.execute("UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE run_id = ? RETURNING 1",
                            [status, error, finished_at or _now(), run_id]).fetchall()
            if not n:
                raise WarehouseError(f"finish_run: no run {run_id!r} in {self.path}")

    def add_metrics(self, run_id: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append metric rows (same validation as :meth:`publish`: ``task`` is required)."""
        with _refused_rows():
            table = metrics_table(rows, run_id=run_id)
        with self.transaction() as con:
            _insert_arrow(con, "metrics", table)
        return table.num_rows

    def add_artifact(self, run_id: str, kind: str, path: str | os.PathLike, rows: int | None = None,
                     sha256: str | None = None) -> None:
        with self.transaction() as con:
            con.execute('INSERT INTO artifacts (run_id, kind, path, "rows", sha256) VALUES (?, ?, ?, ?, ?)',
                        [run_id, kind, str(path), rows, sha256])

    # -- reads -------------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] | None = None):
        """Run a query on a read-only connection; returns a pandas DataFrame."""
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).df()

    def query_rows(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """Column names and rows (read-only)."""
        with self.connect(read_only=True) as con:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description] if cur.description else []
            return cols, cur.fetchall()


def _insert_arrow(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> None:
    if not data.num_rows:
        return
    cols = ", ".join(f'"{n}"' for n in data.column_names)
    con.register("_new_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _new_rows")
    finally:
        con.unregister("_new_rows")


def sync_metric_direction(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Make ``metric_direction`` hold each declared metric's direction
    (:func:`eventatlas.metric_specs.direction_rows`), in one transaction; returns the metrics
    written. Migrations 002, 005 and 006 seeded the table by hand; the spec table is the declaration now,
    so a new metric needs no migration. Rows of undeclared metrics are left alone; nothing is written when
    the table already agrees (so read-mostly callers do not rewrite it)."""
    from ..metric_specs import direction_rows

    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'metric_direction' AND schema_name = 'main' "
                       "AND database_name = current_database()").fetchall():
        return []  # a migrations directory without 002 (tests of old warehouses)
    have = dict(con.execute("SELECT metric, higher_is_better FROM metric_direction").fetchall())
    todo = [(m, hib) for m, hib in direction_rows() if have.get(m) is not hib]
    if todo:
        con.execute("BEGIN TRANSACTION")
        try:
            con.executemany("INSERT OR REPLACE INTO metric_direction (metric, higher_is_better) VALUES (?, ?)", todo)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    return [m for m, _ in todo]
