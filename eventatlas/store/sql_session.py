"""``eventatlas sql``'s session: user SQL that can read the warehouse and the dataset Parquet files its
views read, and nothing else.

Two locks, each enough for the common attacks, together closing the rest:

- The statements are checked before any runs, as DuckDB itself parses them (``duckdb.extract_statements``
  gives each statement and its type): only queries (SELECT and what DuckDB parses as one: WITH, FROM-first,
  VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE, PIVOT/UNPIVOT), EXPLAIN [ANALYZE] of one, and the read-only
  PRAGMAs of :data:`READ_PRAGMAS` pass; one refused statement refuses the whole text.
- The connection is the warehouse opened read-only with extension autoload/autoinstall off and external
  access off (no file, network, extension or environment access) except :func:`dataset_paths`, then
  ``lock_configuration``: what a query calls inside a SELECT (``read_csv``, ``FROM 'other.duckdb'``,
  ``getenv``, ``enable_logging``) fails with DuckDB's permission or lock error.
"""
from __future__ import annotations

import contextlib
import glob
import re
from typing import Iterator

import duckdb

from ..errors import InputError
from .warehouse import Warehouse, _sql_str

READ_PRAGMAS = ("show_tables", "show_tables_expanded", "show_databases", "show", "table_info", "database_size",
                "database_list", "storage_info", "metadata_info", "version", "platform", "user_agent", "functions",
                "collations")
ALLOWED = ("SELECT, WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE, PIVOT and UNPIVOT queries, "
           "EXPLAIN [ANALYZE] of one, PRAGMA " + "/".join(READ_PRAGMAS))
# connection options fixed when the database opens; the rest is set before the lock (see locked_connection)
_OPEN_CONFIG = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
_PARQUET_ARG = re.compile(r"read_parquet\(\s*'((?:[^']|'')*)'", re.I)


class QueryRefused(InputError):
    """A statement ``eventatlas sql`` does not run (bad input: exit 2)."""


def _skip_space(text: str, i: int = 0) -> int:
    """Index of the first character at or after ``i`` that is neither white space nor inside a comment
    (``-- ...`` to the line's end, ``/* ... */`` nested as DuckDB nests them)."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    return i


def _keyword(text: str) -> str:
    """The statement's first word, upper-cased (``INSTALL`` where DuckDB says LOAD, ``RESET`` for SET)."""
    m = re.match(r"[A-Za-z_]+", text[_skip_space(text):])
    return m.group(0).upper() if m else text.strip()[:20]


def _refuse(n: int, what: str) -> QueryRefused:
    return QueryRefused("sql", f"statement {n}", f"{what}: sql is read-only; allowed: {ALLOWED}")


def _check(stmt: duckdb.Statement, n: int) -> None:
    """Raise :class:`QueryRefused` unless ``stmt`` (the ``n``-th of the text) only reads."""
    kind, text = stmt.type, stmt.query
    word = _keyword(text)
    if kind == duckdb.StatementType.SELECT:
        return
    # DuckDB parses a PIVOT whose IN list it must compute as several statements (an ENUM type, then the query)
    if kind == duckdb.StatementType.MULTI and word in ("PIVOT", "PIVOT_WIDER", "WITH"):
        return
    if kind == duckdb.StatementType.PRAGMA:
        m = re.fullmatch(r"PRAGMA\s+(\w+)\s*(?:\(.*\))?\s*;?\s*", text[_skip_space(text):], re.I | re.S)
        if m and m.group(1).lower() in READ_PRAGMAS:
            return
        # IMPORT DATABASE parses as PRAGMA import_database: name what was written
        raise _refuse(n, f"PRAGMA {m.group(1)} is refused" if m else f"{word} is refused")
    if kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs its statement: the statement must pass on its own
        i = _skip_space(text)
        m = re.compile(r"EXPLAIN\b", re.I).match(text, i)
        i = _skip_space(text, m.end()) if m else len(text)
        a = re.compile(r"ANALY[SZ]E\b", re.I).match(text, i)
        i = _skip_space(text, a.end()) if a else i
        if text.startswith("(", i):  # EXPLAIN (FORMAT json) ...
            j = text.find(")", i)
            i = _skip_space(text, j + 1) if j > 0 else len(text)
        try:
            inner = duckdb.extract_statements(text[i:]) if m else []
        except duckdb.Error:
            inner = []
        if len(inner) != 1 or inner[0].type == duckdb.StatementType.EXPLAIN:
            raise _refuse(n, "EXPLAIN of a statement that cannot be checked is refused")
        try:
            _check(inner[0], n)
        except QueryRefused:
            raise _refuse(n, f"EXPLAIN {_keyword(inner[0].query)} is refused") from None
        return
    raise _refuse(n, f"{word} is refused")


def check_query(query: str) -> list[duckdb.Statement]:
    """The statements of ``query`` as DuckDB parses them, each checked by :func:`_check` (a syntax error is
    DuckDB's ``ParserException``); nothing runs here."""
    statements = duckdb.extract_statements(query)
    if not statements:
        raise QueryRefused("sql", "query", "no statement to run")
    for n, s in enumerate(statements, 1):
        _check(s, n)
    return statements


def dataset_paths(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The Parquet files the warehouse's views read (their ``read_parquet`` patterns and the files each
    matches now), the only files besides the warehouse itself a locked session may open."""
    out: list[str] = []
    for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall():
        for arg in _PARQUET_ARG.findall(sql or ""):
            pattern = arg.replace("''", "'")
            out += [pattern, *sorted(glob.glob(pattern))]
    return list(dict.fromkeys(out))


@contextlib.contextmanager
def locked_connection(wh: Warehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to ``wh`` that reads the warehouse and :func:`dataset_paths` only: external
    access off, extension autoload/autoinstall off, configuration locked. Its options differ from a plain
    connection's, so DuckDB never shares its database instance with one in this process."""
    with wh.connect(read_only=True, config=_OPEN_CONFIG) as con:
        paths = dataset_paths(con)
        if paths:
            con.execute(f"SET allowed_paths = [{', '.join(_sql_str(p) for p in paths)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        yield con


def run_query(wh: Warehouse, query: str) -> tuple[list[str], list[tuple]]:
    """Check ``query`` (:func:`check_query`), then run its statements in order on a
    :func:`locked_connection`; the last one's column names and rows."""
    statements = check_query(query)
    with locked_connection(wh) as con:
        for s in statements:
            cur = con.execute(s)
        cols = [d[0] for d in cur.description] if cur.description else []
        return cols, cur.fetchall()
