"""`eventatlas sql` only reads: statements other than queries, EXPLAIN and read-only PRAGMAs are refused
(one `error:` line, exit 2) before anything runs, and what a query reaches inside a SELECT (other files,
other databases, the environment, settings) is stopped by the locked connection. Every README example
query still runs."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.store.sql_session import check_query, locked_connection
from eventatlas.store.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A warehouse with views over the ontoevent sample (8 mentions) and two runs' metrics; beside it another
    DuckDB file and a Parquet file outside the data root."""
    from eventatlas.data.ingest import ingest_dataset

    tmp = tmp_path_factory.mktemp("sqlro")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVENTATLAS_DATA", str(tmp / "data"))
        mp.setenv("EVENTATLAS_WAREHOUSE", str(tmp / "warehouse.duckdb"))
        mp.setenv("COLUMNS", "250")
        ingest_dataset("ontoevent", str(REPO / "datasets" / "samples" / "ontoevent" / "event_relation.json"))
        wh = Warehouse()
        wh.migrate()
        wh.refresh_views(tmp / "data")
        for seed, ari in ((0, 0.40), (1, 0.60)):
            wh.publish({"run_id": f"r{seed}", "flow": "train-all", "method": "untuned", "seed": seed,
                        "params": {"n_clusters": 3, "model_id": "m"}, "status": "completed",
                        "finished_at": f"2026-01-0{seed + 1} 00:00:00"},
                       [{"task": "induction", "dataset": "ontoevent_maven", "split": "train", "method": "untuned",
                         "representation": "trigger", "clustering": "agglomerative", "metric": "ari", "value": ari,
                         "seed": seed}])
        con = duckdb.connect(str(tmp / "other.duckdb"))
        con.execute("CREATE TABLE t AS SELECT 1 AS a")
        con.close()
        duckdb.sql(f"COPY (SELECT 1 AS x) TO '{tmp / 'outside.parquet'}' (FORMAT parquet)")
        yield {"tmp": tmp, "wh": wh, "mentions": next((tmp / "data" / "datasets").glob("*/mentions.parquet")),
               "other": tmp / "other.duckdb"}


def sql(query: str):
    return runner.invoke(app, ["sql", "--", query])


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


REFUSED_MSG = "sql is read-only; allowed: SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE"
DENIED_MSG = "sql reads only the warehouse and its datasets' Parquet files: Permission Error: Cannot access file"

# (query, what the one error line says): refused by the statement check, before anything runs
REFUSED = [
    ("ATTACH '{other}' AS v (READ_WRITE)", "statement 1: ATTACH is refused"),
    ("DETACH warehouse", "statement 1: DETACH is refused"),
    ("DROP TABLE runs", "statement 1: DROP is refused"),
    ("COPY (SELECT 1 AS x) TO '{mentions}' (FORMAT parquet)", "statement 1: COPY is refused"),
    ("COPY runs TO '{tmp}/runs.csv'", "statement 1: COPY is refused"),
    ("EXPORT DATABASE '{tmp}/export'", "statement 1: EXPORT is refused"),
    ("IMPORT DATABASE '{tmp}/export'", "statement 1: IMPORT is refused"),
    ("INSTALL httpfs", "statement 1: INSTALL is refused"),
    ("LOAD httpfs", "statement 1: LOAD is refused"),
    ("SET threads = 1", "statement 1: SET is refused"),
    ("RESET threads", "statement 1: RESET is refused"),
    ("SET enable_external_access = true", "statement 1: SET is refused"),
    ("PRAGMA enable_profiling", "statement 1: PRAGMA enable_profiling is refused"),
    ("PRAGMA import_database('{tmp}/export')", "statement 1: PRAGMA import_database is refused"),
    ("/* /* */ PRAGMA show_tables */ PRAGMA import_database('{tmp}/export')",
     "statement 1: PRAGMA import_database is refused"),
    ("CHECKPOINT", "statement 1: CHECKPOINT is refused"),
    ("CALL checkpoint()", "statement 1: CALL is refused"),
    ("CREATE TABLE x AS SELECT 1", "statement 1: CREATE is refused"),
    ("INSERT INTO runs (run_id) VALUES ('x')", "statement 1: INSERT is refused"),
    ("UPDATE runs SET status = 'x'", "statement 1: UPDATE is refused"),
    ("DELETE FROM metrics", "statement 1: DELETE is refused"),
    ("ALTER TABLE runs ADD COLUMN x INTEGER", "statement 1: ALTER is refused"),
    ("SELECT 1; DROP TABLE runs", "statement 2: DROP is refused"),
    ("SELECT 1; -- harmless\n COPY runs TO '{tmp}/smuggled.csv'", "statement 2: COPY is refused"),
    ("EXPLAIN ANALYZE COPY runs TO '{tmp}/explained.csv'", "statement 1: EXPLAIN COPY is refused"),
    ("EXPLAIN ANALYZE /* x */ CREATE TABLE y AS SELECT 1", "statement 1: EXPLAIN CREATE is refused"),
    ("BEGIN TRANSACTION", "statement 1: BEGIN is refused"),
    ("PREPARE p AS SELECT 1", "statement 1: PREPARE is refused"),
    ("SET VARIABLE v = 1", "statement 1: SET is refused"),
    ("USE system", "statement 1: USE is refused"),
    ("VACUUM", "statement 1: VACUUM is refused"),
]
# (query, what the one error line says): parsed as a query, stopped by the locked connection
DENIED = [
    ("SELECT * FROM read_csv('/etc/passwd')", DENIED_MSG + ' "/etc/passwd"'),
    ("SELECT * FROM read_parquet('{tmp}/outside.parquet')", DENIED_MSG + ' "{tmp}/outside.parquet"'),
    ("SELECT * FROM read_text('{tmp}/data/datasets/*/manifest.json')", DENIED_MSG),
    ("SELECT * FROM '{other}'", DENIED_MSG + ' "{other}"'),
    ("SELECT * FROM query_table('{other}')", DENIED_MSG + ' "{other}"'),
    ("SELECT * FROM read_duckdb('{other}', table_name='t')", DENIED_MSG),
    ("SELECT * FROM glob('/etc/*')", DENIED_MSG),
    ("SELECT * FROM 'https://example.com/x.parquet'", DENIED_MSG),
    ("SELECT getenv('HOME')", "Scalar Function with name getenv does not exist"),
    ("SELECT * FROM enable_logging(storage='file', storage_path='{tmp}/logs')",
     'Cannot change configuration option "enable_logging" - the configuration has been locked'),
    ("SELECT * FROM enable_profiling()", "the configuration has been locked"),
]


@pytest.mark.parametrize("query,message", REFUSED + DENIED, ids=[q for q, _ in REFUSED + DENIED])
def test_sql_refuses_what_does_not_only_read(world, query, message):
    before = {p: _sha(p) for p in (world["mentions"], world["wh"].path, world["other"])}
    files = sorted(world["tmp"].rglob("*"))
    fmt = {k: str(world[k]) for k in ("tmp", "other", "mentions")}
    r = sql(query.format(**fmt))
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    assert message.format(**fmt) in r.stderr
    if query in dict(REFUSED):
        assert r.stderr.startswith(f"error: sql:{message.split(':')[0]}: ") and REFUSED_MSG in r.stderr
    # nothing written: the dataset table, the warehouse and the other database are as they were, no new file
    assert {p: _sha(p) for p in before} == before and sorted(world["tmp"].rglob("*")) == files


def test_the_refused_copy_leaves_the_dataset_table(world):
    sql(f"COPY (SELECT 1 AS x) TO '{world['mentions']}' (FORMAT parquet)")
    r = sql("SELECT count(*) AS n FROM mentions")
    assert r.exit_code == 0 and "│ 8 │" in r.stdout  # the manifest's 8 rows
    assert duckdb.connect(str(world["other"]), read_only=True).execute("SELECT a FROM t").fetchall() == [(1,)]


ALLOWED = [
    ("SELECT count(*) AS n FROM mentions", "│ 8 │"),
    ("WITH a AS (SELECT 41 + 1 AS x) SELECT x FROM a", "│ 42 │"),
    ("FROM runs SELECT count(*) AS n", "│ 2 │"),
    ("VALUES (7, 'seven')", "seven"),
    ("TABLE metric_direction", "higher_is_better"),
    ("DESCRIBE runs", "data_fingerprints"),
    ("SHOW TABLES", "schema_version"),
    ("SUMMARIZE metrics", "│ run_id"),
    ("PRAGMA show_tables", "leaderboard"),
    ("PRAGMA table_info('runs')", "started_at"),
    ("PRAGMA database_size", "│ warehouse"),
    ("PRAGMA version", "library_version"),
    ("EXPLAIN SELECT * FROM mentions", "physical_plan"),
    ("EXPLAIN ANALYZE SELECT count(*) FROM mentions", "analyzed_plan"),
    ("PIVOT (SELECT seed, metric, value FROM metrics) ON seed USING max(value)", "│ ari"),
    ("UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v", "│ b"),
    ("SELECT count(*) AS n FROM read_parquet('{tmp}/data/datasets/*/mentions.parquet')", "│ 8 │"),
    ("SELECT 1 AS first; SELECT 2 AS second", "second"),
    ("-- a comment first\nSELECT params->>'n_clusters' AS k FROM runs LIMIT 1", "│ 3 │"),
]


@pytest.mark.parametrize("query,shows", ALLOWED, ids=[q for q, _ in ALLOWED])
def test_sql_runs_reads(world, query, shows):
    r = sql(query.format(tmp=world["tmp"]))
    assert r.exit_code == 0, r.output
    assert shows in r.stdout


def test_readme_example_queries_run_through_sql(world):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", readme, re.S)
    statements = [s.strip() for b in blocks for s in b.split(";") if s.strip()]
    statements = [s for s in statements if any(not ln.strip().startswith("--") for ln in s.splitlines())]
    assert len(statements) >= 6
    for s in statements:
        r = sql(s)
        assert r.exit_code == 0, (s, r.output)
    r = sql(next(s for s in statements if "AS best_ari" in s))
    assert "│ 60 " in r.stdout  # the best of seeds 0.40 and 0.60, x100


def test_the_connection_is_locked_without_the_statement_check(world):
    """The second lock on its own: what the statement check refuses fails on the connection too, except
    writes to the very files it may read (the statement check's job)."""
    with locked_connection(world["wh"]) as con:
        assert con.execute("SELECT count(*) FROM mentions").fetchall() == [(8,)]
        assert con.execute("SELECT current_setting('autoload_known_extensions'), "
                           "current_setting('autoinstall_known_extensions')").fetchall() == [(False, False)]
        for q in (f"ATTACH '{world['other']}' AS v (READ_WRITE)", "INSTALL httpfs", "LOAD httpfs",
                  "SELECT * FROM read_csv('/etc/passwd')", f"EXPORT DATABASE '{world['tmp']}/x'"):
            with pytest.raises(duckdb.PermissionException):
                con.execute(q)
        for q in ("SET threads = 1", "SET enable_external_access = true", "SET lock_configuration = false",
                  "SET allowed_directories = ['/']", "SET autoinstall_known_extensions = true"):
            with pytest.raises(duckdb.InvalidInputException, match="locked"):
                con.execute(q)
        # its database instance is never shared with a plain connection of this process
        with pytest.raises(duckdb.ConnectionException, match="different configuration"):
            duckdb.connect(str(world["wh"].path), read_only=True)
    cols, rows = world["wh"].query_rows("SELECT current_setting('enable_external_access'), "
                                        "current_setting('lock_configuration')")
    assert rows == [(True, False)]  # a later plain connection is not locked


def test_check_query_parses_with_duckdb(world):
    assert [s.type.name for s in check_query("SELECT 1; FROM runs; DESCRIBE runs")] == ["SELECT"] * 3
    with pytest.raises(duckdb.ParserException):
        check_query("SELEC 1")
    r = sql("   ")
    assert r.exit_code == 2 and "no statement to run" in r.stderr


@pytest.mark.parametrize("query", ["PIVOT_WIDER runs ON status USING count(*)", "pragma show_tables",
                                   "Pragma table_info('runs')", "EXPLAIN (FORMAT json) SELECT 1",
                                   "explain analyze (format json) select 1"])
def test_check_query_passes_read_only_statements_in_any_case_and_form(query):
    """Lower-case PRAGMAs, PIVOT_WIDER (parsed as several statements) and EXPLAIN with options only read."""
    assert len(check_query(query)) == 1


def test_a_refused_statement_not_starting_with_a_word_is_named_by_its_text():
    from eventatlas.store.sql_session import _keyword

    assert _keyword("  (1) ") == "(1)"
    assert _keyword("/* note */ drop table runs") == "DROP"


def test_an_empty_query_is_refused_naming_sql():
    from eventatlas.store.sql_session import QueryRefused

    with pytest.raises(QueryRefused, match=r"^sql:query: no statement to run$"):
        check_query(" -- nothing\n ")
