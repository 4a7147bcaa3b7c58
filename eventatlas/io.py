"""Atomic, batched Parquet I/O, stable ids, fingerprints and reject bookkeeping.

Nothing here is half-written: writers stream into a temp file beside the target
and rename it into place only when the whole table is done (``os.replace`` is
atomic on POSIX). A failed ingest leaves the previous tables untouched.

A dataset version is switched in ONE atomic step: :class:`DatasetWriter` writes every table and the
manifest into a staging directory (``<parent>/.staging/<name>.<pid>.<random>/``) and
:func:`switch_dir` exchanges it with the dataset directory (Linux ``renameat2(RENAME_EXCHANGE)``; a
plain rename for a new name). A kill at any point leaves the old version or the new one complete;
what a dead process left in ``.staging`` is removed by :func:`clean_staging` on the next write.
``EVENTATLAS_FAULT_AT=<step>`` ends the process at that step (:func:`fault_point`, tests only).

A write that runs out of disk space or quota (ENOSPC, EDQUOT) removes its temporaries at once and raises
:class:`DiskFull` naming the file it was writing (for a dataset, the table's final path); what it would
have replaced is untouched.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq

from .names import check_name  # every dataset writer (ingest, extract-events, builders) checks its name
from .schema import REJECTS, SCHEMA_VERSION, TABLES



def lock_file(path: str | os.PathLike, *, wait: bool) -> int | None:
    """An open fd holding an exclusive ``flock`` on ``path`` (created if absent), or None when another process
    holds it and not ``wait``. The kernel drops the lock when its holder dies (SIGKILL included); closing the
    fd lets it go."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        if wait:
            raise
        return None
    return fd

def stable_id(*parts: Any, length: int = 16) -> str:
    """Deterministic id from its parts (same input -> same id on every machine)."""
    h = hashlib.blake2b(digest_size=length)
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint_paths(paths: Iterable[str | os.PathLike]) -> str:
    """Content fingerprint of files (and directories, recursively), order-independent.

    Uses size + sha256 of content so the same data in another place has the same print.
    """
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file()))
        elif p.exists():
            files.append(p)
    digests = sorted(sha256_file(f) for f in files)
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:16]


DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(OSError):
    """A write that ran out of disk space or quota; ``filename`` is what it was writing. Its temporary files
    are gone and the file or dataset it would have replaced is as it was."""


def is_disk_full(exc: BaseException | None) -> bool:
    """ENOSPC / EDQUOT, raised as such or wrapped by a library (pyarrow keeps the errno, DuckDB only the
    system's message), on ``exc`` or the exceptions it was raised from."""
    texts = tuple(os.strerror(n) for n in DISK_FULL_ERRNOS)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        if any(t in str(exc) for t in texts):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def disk_full(exc: BaseException, path: str | os.PathLike) -> DiskFull:
    """``exc`` (a disk-full error) as a :class:`DiskFull` naming ``path``."""
    n = exc.errno if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS else \
        next((n for n in DISK_FULL_ERRNOS if os.strerror(n) in str(exc)), errno.ENOSPC)
    return DiskFull(n, os.strerror(n), str(path))


@contextlib.contextmanager
def naming_disk_full(path: str | os.PathLike) -> Iterator[None]:
    """Around a write of ``path``: a disk-full error inside becomes :class:`DiskFull` naming ``path``."""
    try:
        yield
    except OSError as e:
        if not is_disk_full(e):
            raise
        raise disk_full(e, path) from e


def _remove(p: Path) -> None:
    """Remove a temporary file or directory if it is there."""
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _tmp_path(target: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    return Path(name)


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


# a new file gets what open() would give it (0o666 less the umask), not mkstemp's private 0o600: reports and
# pages written atomically must stay readable by whoever may read the directory
_NEW_FILE_MODE = 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path beside ``target``; rename onto it only if the block succeeds. The file keeps the
    mode of the one it replaces, or gets a new file's usual mode."""
    target = Path(target)
    with naming_disk_full(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _tmp_path(target)
    try:
        with naming_disk_full(target):  # the block's write of the temp file included
            yield tmp
            if tmp.is_file():  # a file's mode only: a directory keeps its own
                try:
                    mode = stat.S_IMODE(target.stat().st_mode)
                except FileNotFoundError:
                    mode = _NEW_FILE_MODE
                os.chmod(tmp, mode)
            os.replace(tmp, target)
    finally:
        _remove(tmp)


def atomic_write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(target: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_parquet(table: pa.Table, target: str | os.PathLike) -> Path:
    """Write a whole table atomically."""
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return Path(target)


def rows_to_table(rows: list[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table from dict rows, filling missing optional fields with null."""
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(cols, schema=schema)


_VALUE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


def _row_size(row: Mapping[str, Any]) -> int:
    """Rough bytes a buffered row holds: its text, and a word or so per list item."""
    n = 0
    for v in row.values():
        if isinstance(v, str):
            n += len(v)
        elif isinstance(v, list):
            n += 32 * len(v) + sum(len(x) for x in v if isinstance(x, str))
    return n


class TableWriter:
    """Stream dict rows into one Parquet file in batches; atomic on ``commit``.

    A batch is written at ``batch_rows`` rows or about ``batch_bytes`` of buffered text, whichever comes first
    (documents with full texts would otherwise hold a corpus in memory before the first write).
    Use as a context manager: on an exception the temp file is removed and the
    target is left as it was.
    """

    def __init__(self, target: str | os.PathLike, schema: pa.Schema, batch_rows: int = 50_000, on_bad_row=None,
                 batch_bytes: int = 32 << 20):
        self.on_bad_row = on_bad_row  # (row, error) -> None: drop a row whose values do not fit the schema
        self.target = Path(target)
        self.schema = schema
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self.rows = 0
        self._buf: list[Mapping[str, Any]] = []
        self._bytes = 0
        self._done = True  # nothing to abort until the temp file exists
        with naming_disk_full(self.target):
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = _tmp_path(self.target)
            try:
                self._writer = pq.ParquetWriter(self._tmp, schema, compression="zstd")
            except BaseException:
                self._tmp.unlink(missing_ok=True)
                raise
        self._done = False

    def write(self, row: Mapping[str, Any]) -> None:
        self._buf.append(row)
        self._bytes += _row_size(row)
        if len(self._buf) >= self.batch_rows or self._bytes >= self.batch_bytes:
            try:
                with naming_disk_full(self.target):
                    self._flush()
            except OSError:  # a full disk: the temp file goes at once, not when the block ends
                self.abort()
                raise

    def write_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for r in rows:
            self.write(r)

    def _flush(self) -> None:
        if self._buf:
            try:
                table = rows_to_table(self._buf, self.schema)
            except _VALUE_ERRORS:
                if self.on_bad_row is None:
                    raise
                table = self._without_bad_rows()
            self._writer.write_table(table)
            self.rows += table.num_rows
            self._buf = []
            self._bytes = 0

    def _without_bad_rows(self) -> pa.Table:
        """Only on a failed batch: convert row by row, hand the rows that do not fit to ``on_bad_row``."""
        good = []
        for r in self._buf:
            try:
                rows_to_table([r], self.schema)
                good.append(r)
            except _VALUE_ERRORS as e:
                self.on_bad_row(r, e)
        return rows_to_table(good, self.schema)

    def commit(self) -> Path:
        try:
            with naming_disk_full(self.target):
                self._flush()
                self._writer.close()
                os.replace(self._tmp, self.target)
        except BaseException:
            self.abort()
            raise
        self._done = True
        return self.target

    def abort(self) -> None:
        if not self._done:
            with contextlib.suppress(Exception):
                self._writer.close()
            with contextlib.suppress(FileNotFoundError):
                self._tmp.unlink()
            self._done = True

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._done:
            self.commit()
        else:
            self.abort()


FAULT_ENV = "EVENTATLAS_FAULT_AT"
STAGING = ".staging"


_FAULT_SEEN: dict[str, int] = {}


def fault_point(step: str) -> None:
    """Crash-consistency test hook: with ``EVENTATLAS_FAULT_AT=<step>`` (or ``<step>:<n>``, the n-th time
    the step is reached) the process ends here at once, as a kill -9 would (no cleanup, no finally
    blocks); a no-op otherwise."""
    want = os.environ.get(FAULT_ENV)
    if not want or want.split(":")[0] != step:
        return
    _FAULT_SEEN[step] = _FAULT_SEEN.get(step, 0) + 1
    if _FAULT_SEEN[step] == int(want.partition(":")[2] or 1):
        os._exit(137)


def link_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Hard-link ``src`` at ``dst`` (a copy where the file system cannot link). Safe only because no file
    of a dataset, build or model is ever written in place: a link shared by two versions never changes."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def link_tree(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Every file under ``src`` hard-linked at the same relative path under ``dst`` (:func:`link_file`)."""
    src, dst = Path(src), Path(dst)
    for f in sorted(src.rglob("*")):
        if f.is_file():
            to = dst / f.relative_to(src)
            to.parent.mkdir(parents=True, exist_ok=True)
            link_file(f, to)


def staging_dir(target: str | os.PathLike) -> Path:
    """A fresh directory to build the next version of ``target`` in: ``<parent>/.staging/<name>.<pid>.<hex>``
    (two levels below the parent, so no ``<parent>/*/<table>.parquet`` glob sees it)."""
    target = Path(target)
    d = target.parent / STAGING / f"{target.name}.{os.getpid()}.{secrets.token_hex(4)}"
    d.mkdir(parents=True)
    return d


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def switch_dir(new: str | os.PathLike, target: str | os.PathLike) -> None:
    """Make the complete directory ``new`` the directory ``target`` in one atomic step: a rename for a
    new name, an exchange for an existing one (the old version then sits at ``new``'s path and is removed).
    Without an atomic exchange (not Linux, or a filesystem without it) the old directory is first renamed
    to ``<new>.old``: a kill between the two renames is rolled forward by :func:`clean_staging`."""
    new, target = Path(new), Path(target)
    fault_point("switch")
    if not target.exists():
        os.rename(new, target)
    elif _exchange(new, target):
        fault_point("switched")
        shutil.rmtree(new, ignore_errors=True)
    else:
        old = new.with_name(new.name + ".old")
        os.rename(target, old)
        fault_point("switch_half")
        os.rename(new, target)
        shutil.rmtree(old, ignore_errors=True)
    with contextlib.suppress(OSError):
        new.parent.rmdir()  # .staging, when nothing else is being built beside it


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_staging(target: str | os.PathLike) -> list[Path]:
    """Remove the staging directories beside ``target`` whose process is gone (a killed write), of any
    name. A switch of ``target`` killed between its two renames (no atomic exchange) is rolled forward:
    its complete new version becomes ``target`` (another name's such pair waits for that name's next
    write). Returns what was removed."""
    target = Path(target)
    root, removed = target.parent / STAGING, []
    if not root.is_dir():
        return removed
    for d in sorted(root.iterdir()):  # a new version sorts before its ".old"
        parts = d.name.removesuffix(".old").rsplit(".", 2)  # <name>.<pid>.<hex>
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) == os.getpid() or _pid_alive(int(parts[1])):
            continue  # not a staging directory, or a live writer's (this process's included)
        half = d.with_name(d.name + ".old").exists() or d.name.endswith(".old") and d.with_name(d.name[:-4]).exists()
        if parts[0] != target.name and half:
            continue
        if (parts[0] == target.name and not d.name.endswith(".old") and not target.exists()
                and (d / "manifest.json").exists() and d.with_name(d.name + ".old").exists()):
            os.rename(d, target)  # killed between the two renames of a non-atomic switch
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    with contextlib.suppress(OSError):
        root.rmdir()
    return removed


class DatasetWriter:
    """Write all tables of one dataset so that either every table lands or none does.

    Each table streams into a staging directory; ``commit`` writes ``manifest.json`` there last and
    switches the staging directory in as the dataset directory in one atomic step (:func:`switch_dir`).
    Files of the current directory this writer does not write (tables it was not given, a builder's
    extra artefacts) are carried into the new version by hard links.
    """

    def __init__(self, out_dir: str | os.PathLike, dataset: str, tables: Iterable[str] | None = None, on_bad_row=None):
        """``on_bad_row(table, row, error)``: called for a row whose values do not fit the table's schema
        (then dropped); without it such a row fails the write."""
        self.out_dir = Path(out_dir)
        self.dataset = check_name(dataset, "dataset")
        self.writers: dict[str, TableWriter] = {}
        try:
            with naming_disk_full(self.out_dir):
                self.stage = staging_dir(self.out_dir)
        except OSError:
            with contextlib.suppress(OSError):
                (self.out_dir.parent / STAGING).rmdir()  # when nothing else is being built beside it
            raise
        for name in tables or TABLES:
            try:
                self.writers[name] = TableWriter(
                    self.stage / f"{name}.parquet", TABLES[name],
                    on_bad_row=None if on_bad_row is None else (lambda r, e, n=name: on_bad_row(n, r, e)))
            except OSError as e:  # a writer that cannot start takes the staging directory with it
                self._failed(e, name)

    def _failed(self, e: OSError, table: str | None) -> NoReturn:
        """A file-system failure (a full disk): remove the staging directory at once and name the table's
        final path (or the dataset directory), not the staged one."""
        self.abort()
        if is_disk_full(e):
            raise disk_full(e, self.out_dir / f"{table}.parquet" if table else self.out_dir) from e
        raise e

    def flush(self, tables: Iterable[str]) -> None:
        """Convert the buffered rows of ``tables`` now (so their bad rows are known before the rejects are written)."""
        for t in tables:
            try:
                self.writers[t]._flush()
            except OSError as e:
                self._failed(e, t)

    def write(self, table: str, row: Mapping[str, Any]) -> None:
        try:
            self.writers[table].write(row)
        except OSError as e:
            self._failed(e, table)

    def commit(self, manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
        for name, w in self.writers.items():
            try:
                w.commit()
            except OSError as e:
                self._failed(e, name)
        fault_point("tables")
        try:
            if self.out_dir.is_dir():
                for p in self.out_dir.iterdir():
                    if (p.is_file() and not p.name.startswith(".") and p.name != "manifest.json"
                            and not (self.stage / p.name).exists()):
                        link_file(p, self.stage / p.name)
            counts = {name: w.rows for name, w in self.writers.items()}
            man = {"dataset": self.dataset, "schema_version": SCHEMA_VERSION, "rows": counts, **(manifest or {})}
            atomic_write_json(self.stage / "manifest.json", man)
        except OSError as e:
            self._failed(e, None)
        fault_point("manifest")
        with naming_disk_full(self.out_dir):  # a rename can need a directory block too
            switch_dir(self.stage, self.out_dir)
        fault_point("done")
        return man

    def abort(self) -> None:
        for w in self.writers.values():
            w.abort()
        shutil.rmtree(self.stage, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.stage.parent.rmdir()

    def __enter__(self) -> "DatasetWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


class Rejects:
    """Collects tolerated input problems with reasons; summarised per reason."""

    def __init__(self, dataset: str, limit_raw: int = 500):
        self.dataset = dataset
        self.rows: list[dict[str, Any]] = []
        self.limit_raw = limit_raw

    def add(self, source: str | os.PathLike | None, location: Any, reason: str, detail: str = "", raw: Any = None) -> None:
        raw_s = None if raw is None else (raw if isinstance(raw, str) else json.dumps(raw, default=str, ensure_ascii=False))
        self.rows.append(
            {
                "dataset": self.dataset,
                "source": None if source is None else str(source),
                "location": None if location is None else str(location),
                "reason": reason,
                "detail": detail,
                "raw": None if raw_s is None else raw_s[: self.limit_raw],
            }
        )

    def counts(self) -> dict[str, int]:
        return dict(Counter(r["reason"] for r in self.rows))

    def __len__(self) -> int:
        return len(self.rows)

    def table(self) -> pa.Table:
        return rows_to_table(self.rows, REJECTS)

