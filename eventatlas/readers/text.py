"""A researcher's own plain corpus: documents split into sentences and tokens, no mentions (dataset kind ``text``).

Input (``path``): a ``.txt`` file (one document; id = its path relative to the input), a ``.jsonl`` file (one
document a line: ``{"id", "text"}``, optional ``title``, ``lang`` and ``date``), a ``.csv`` file (a header row;
columns ``text_column`` (default ``text``) and ``id_column`` (default ``id``), the same optional ones) or a
``.parquet`` file (the same columns), a directory of those (recursive, sorted; other files are counted in
``stats.skipped_files``) or a zip of those (a zip counts as a folder). A row without an id gets
``<file>:<row>``. ``.txt`` files are UTF-8, UTF-8 with a BOM or UTF-16 with a BOM; JSON lines and CSV are
UTF-8 (a BOM is dropped): any other bytes are a reject naming file and byte offset, never a guess.

Rows: ``documents`` (full ``text``, the ``sentences`` strings, ``title``, ``language`` (``lang``, else the
``language`` option), ``date`` in ``extra``) and ``sentences`` (:data:`eventatlas.schema.SENTENCES`: char offsets
into the document text, token offsets into the sentence). Memory: one document at a time; a document or line
past the record cap (:func:`._common.max_record_bytes`) is a reject, skipped without being read whole. A bad
record is a reject (``empty_document``, ``undecodable_text``, ``binary_file``, ``oversized_record``,
``missing_field``, ``bad_field``, ``bad_json``, ``bad_record``, ``unreadable_file``, ``duplicate_document``);
an input with no readable file is one InputError naming it.

Splitter: syntok (``segmenter.analyze``: sentences and tokens with offsets into the text, paragraphs at blank
lines). ``benchmarks/bench_sentence_split.py`` measured it against pysbd and spaCy's rule-based sentencizer
(``spacy.blank("en")``) on MAVEN documents (the original sentences of 1,189 articles joined with spaces):
boundary F1 0.991 (pysbd 0.996, spaCy 0.995) at 7,400 sentences/s (pysbd 1,400, spaCy 17,900; a loaded 2-core
machine); on MAVEN sentences given as space-joined tokens F1 0.944 (pysbd 0.912, spaCy 0.995). spaCy, better
and faster, is not used because ``import spacy`` loads torch (through thinc: 3 s and 284 MB for every ingest,
against 0.02 s and 14 MB) and adds 16 packages (200 MB); pysbd gives no tokens and is 5x slower.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import DocumentIds, bump, dumps, max_record_bytes, record_guard, records
from ._zip import SafeZip, looks_like_zip

DEFAULT_DATASET = "text"
EXPECTED_TABLES = ("documents",)  # ingest refuses an input that yields none
KINDS = {".txt": "txt", ".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
_SNIFF = 8192  # bytes of a line-based file looked at for NUL bytes and a UTF-16 BOM
_PARQUET_BATCH = 64  # rows per Parquet batch: documents can be long
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_NUL = b"\x00"


@dataclass(frozen=True)
class _File:
    rel: str  # path relative to the input (document ids, ``documents.source``)
    source: str  # what a reject names: the file, or ``archive:member``
    kind: str
    size: int
    open: Callable[[], Any]  # a binary stream with read / readline
    path: Path | None = None  # on disk (None: a zip member)


def _plain(path: Path, rel: str) -> _File:
    return _File(rel, str(path), KINDS[path.suffix.lower()], path.stat().st_size, lambda: open(path, "rb"), path)


def _readable(path: Path) -> None:
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise InputError(path, "-", "cannot be read (permission denied)")


def _candidates(path: Path) -> list[tuple[Path, str]]:
    """(file, relative name) of every file under ``path`` the reader takes, sorted; hidden ones left out."""
    _readable(path)
    if not path.is_dir():
        return [(path, path.name)]
    out = []
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts):
            out.append((p, rel))
    return out


def _supported(p: Path) -> bool:
    return p.suffix.lower() in KINDS or looks_like_zip(p)


def input_paths(path, **opts) -> list[Path]:
    """The files the reader reads (what the ingest fingerprints); an unreadable one is refused here, first."""
    path = Path(path)
    files = [p for p, _ in _candidates(path) if path.is_file() or _supported(p)]
    for p in files:
        _readable(p)
    return files


def _files(path: Path, stats: dict | None) -> Iterator[_File]:
    found = False
    for p, rel in _candidates(path):
        if p.suffix.lower() in KINDS:  # before the zip magic: a .txt is text whatever its first bytes
            found = True
            yield _plain(p, rel)
        elif looks_like_zip(p):
            found = True
            yield from _zip_members(p, rel if path.is_dir() else "", stats)
        elif path.is_file():
            raise InputError(p, "-", f"not a {', '.join(KINDS)} or .zip file")
        else:
            bump(stats, "skipped_files")
    if not found:
        raise InputError(path, "-", f"no {', '.join(KINDS)} or .zip file under it")


def _zip_members(p: Path, prefix: str, stats: dict | None) -> Iterator[_File]:
    with SafeZip(p) as z:
        for name in sorted(z.namelist()):
            if name.endswith("/") or any(part.startswith((".", "__MACOSX")) for part in name.split("/")):
                continue
            kind = KINDS.get(Path(name).suffix.lower())
            if kind is None:
                bump(stats, "skipped_files")
                continue
            rel = f"{prefix}/{name}" if prefix else name
            yield _File(rel, f"{z.filename}:{name}", kind, z.size(name), lambda n=name: z.open(n))


# ----------------------------------------------------------------------------- bytes -> text
def _decode(rejects: Rejects, f: _File, loc: str, data: bytes, base: int = 0) -> str | None:
    """The text of ``data`` (a whole .txt file, or one line at byte ``base``), or None with a reject saying why.
    A byte-order mark counts only at the start of the file."""
    for bom, enc in _BOMS if base == 0 else ():
        if data.startswith(bom):
            if enc != "utf-8" and f.kind != "txt":  # a line-based file is split on b"\n": UTF-16 cannot be
                rejects.add(f.source, loc, "undecodable_text", f"UTF-16 (byte-order mark at byte {base}): {f.kind} "
                            "files are read as UTF-8; save it as UTF-8")
                return None
            body, skip = data[len(bom):], len(bom)
            break
    else:
        body, skip, enc = data, 0, "utf-8"
    if enc == "utf-8" and _NUL in body:
        rejects.add(f.source, loc, "binary_file", f"NUL byte at byte {base + skip + body.index(_NUL)}: not text")
        return None
    try:
        text = body.decode(enc)
    except UnicodeDecodeError as e:
        rejects.add(f.source, loc, "undecodable_text", f"not valid {enc.upper()} ({e.reason} at byte "
                    f"{base + skip + e.start}); accepted: UTF-8, UTF-8 or UTF-16 with a byte-order mark")
        return None
    if "\x00" in text:  # UTF-16 text: NUL bytes are normal, a NUL character is not
        rejects.add(f.source, loc, "binary_file", f"NUL character at character {text.index(chr(0))}: not text")
        return None
    return text


def _lines(stream: BinaryIO, cap: int) -> Iterator[tuple[int, int, bytes | None]]:
    """(1-based line, byte offset, bytes) of each line; bytes None for a line past ``cap``, which is skipped in
    pieces of ``cap`` bytes, never held whole."""
    n = off = 0
    for raw in iter(lambda: stream.readline(cap + 1), b""):
        n += 1
        if len(raw) > cap and not raw.endswith(b"\n"):
            size = len(raw)
            for more in iter(lambda: stream.readline(cap + 1), b""):
                size += len(more)
                if more.endswith(b"\n"):
                    break
            yield n, off, None
            off += size
            continue
        yield n, off, raw
        off += len(raw)


def _text_lines(f: _File, stream: BinaryIO, rejects: Rejects, cap: int) -> Iterator[tuple[int, str]]:
    """Decoded lines (line ends kept) of a UTF-8 line-based file; a bad or oversized line is a reject."""
    for n, off, raw in _lines(stream, cap):
        if raw is None:
            rejects.add(f.source, f"line {n}", "oversized_record", f"line longer than {cap} bytes "
                        "(EVENTATLAS_MAX_RECORD_BYTES); skipped without reading it whole")
            continue
        text = _decode(rejects, f, f"line {n}", raw, off)
        if text is not None:
            yield n, text


def _sniff(f: _File, rejects: Rejects) -> bool:
    """False (and a reject for the whole file) when the head of a line-based file shows it is not UTF-8 text."""
    with f.open() as s:
        head = s.read(_SNIFF)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return _decode(rejects, f, "-", head) is not None
    if _NUL in head:
        rejects.add(f.source, "-", "binary_file", f"NUL byte at byte {head.index(_NUL)}: not text")
        return False
    return True


# ----------------------------------------------------------------------------- records of each format
def _txt(f: _File, rejects: Rejects, cap: int) -> Iterator[tuple[str, dict]]:
    if f.size > cap:
        rejects.add(f.source, "-", "oversized_record", f"document of {f.size} bytes, over the cap of {cap} "
                    "(EVENTATLAS_MAX_RECORD_BYTES); skipped without reading it")
        return
    with f.open() as s:
        data = s.read(cap + 1)
    if len(data) > cap:  # the file grew, or a zip member's declared size was wrong
        rejects.add(f.source, "-", "oversized_record", f"document over the cap of {cap} bytes; skipped")
        return
    text = _decode(rejects, f, "-", data)
    if text is not None:
        yield "-", {"id": f.rel, "text": text}


def _jsonl(f: _File, rejects: Rejects, cap: int) -> Iterator[tuple[str, Any]]:
    if not _sniff(f, rejects):
        return
    with f.open() as s:
        for n, line in _text_lines(f, s, rejects, cap):
            if not line.strip():
                continue
            try:
                yield f"line {n}", json.loads(line)
            except (ValueError, RecursionError) as e:
                rejects.add(f.source, f"line {n}", "bad_json", f"invalid JSON: {e}"[:300], line[:300])


def _csv(f: _File, rejects: Rejects, cap: int, text_column: str) -> Iterator[tuple[str, Any]]:
    if not _sniff(f, rejects):
        return
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, cap))  # the default (128 KiB) would refuse a long document
    try:
        with f.open() as s:
            rows = csv.reader(line for _, line in _text_lines(f, s, rejects, cap))
            header = next(rows, None)
            if header is None:
                return
            if text_column not in header:
                rejects.add(f.source, "line 1", "missing_field", f"no column {text_column!r} (columns: "
                            f"{', '.join(header)[:200]}); pass text_column=NAME")
                return
            n = 0  # data rows: the id of a row without one is its number
            while True:
                try:
                    row = next(rows)
                except StopIteration:
                    return
                except csv.Error as e:  # the field limit is the cap: a quoted field spanning lines stays bounded
                    n += 1
                    why = "oversized_record" if "field limit" in str(e) else "bad_record"
                    rejects.add(f.source, f"row {n}", why, f"CSV (line {rows.line_num}): {e}")
                    continue
                if not row:
                    continue
                n += 1
                if len(row) != len(header):
                    rejects.add(f.source, f"row {n}", "bad_record", f"{len(row)} fields (line {rows.line_num}), "
                                f"the header has {len(header)}", str(row)[:300])
                    continue
                yield f"row {n}", {k: (v if v != "" else None) if k != text_column else v for k, v in zip(header, row)}
    finally:
        csv.field_size_limit(limit)


def _parquet(f: _File, rejects: Rejects, cap: int, text_column: str, id_column: str) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    spool = None
    try:
        if f.path is None:  # a zip member: spooled to disk (Parquet needs to seek), not held in memory
            spool = tempfile.TemporaryFile()
            with f.open() as s:
                for block in iter(lambda: s.read(1 << 20), b""):
                    spool.write(block)
            spool.seek(0)
        try:
            pf = pq.ParquetFile(spool or f.path)
        except (pa.ArrowException, OSError) as e:
            rejects.add(f.source, "-", "unreadable_file", f"not a readable Parquet file ({e})"[:300])
            return
        names = pf.schema_arrow.names
        if text_column not in names:
            rejects.add(f.source, "-", "missing_field", f"no column {text_column!r} (columns: "
                        f"{', '.join(names)[:200]}); pass text_column=NAME")
            return
        cols = [c for c in dict.fromkeys((id_column, text_column, "title", "lang", "language", "date")) if c in names]
        i = 0
        try:
            for batch in pf.iter_batches(batch_size=_PARQUET_BATCH, columns=cols):
                for row in batch.to_pylist():
                    i += 1
                    yield f"row {i}", row
        except (pa.ArrowException, OSError) as e:
            rejects.add(f.source, f"after row {i}", "unreadable_file", f"damaged Parquet file ({e})"[:300])
    finally:
        if spool is not None:
            spool.close()


# ----------------------------------------------------------------------------- documents
def split(text: str) -> list[tuple[int, int, list[int], list[int]]]:
    """``(start, end, token_starts, token_ends)`` of each sentence of ``text`` (syntok): start/end index ``text``,
    token offsets index the sentence text, end-exclusive. A token that is not the text at its offsets (a
    splitter that rewrote its input) raises ValueError, which the reader turns into a reject."""
    from syntok import segmenter

    out = []
    for para in segmenter.analyze(text):
        for sent in para:
            toks = [t for t in sent if t.value]
            if not toks:
                continue
            start = toks[0].offset
            starts = [t.offset - start for t in toks]
            ends = [s + len(t.value) for s, t in zip(starts, toks)]
            for t in toks:
                if text[t.offset:t.offset + len(t.value)] != t.value:
                    raise ValueError(f"token {t.value!r} is not the text at offset {t.offset}")
            out.append((start, start + ends[-1], starts, ends))
    return out


def _doc_id(value: Any, fallback: str) -> str:
    if value is None or value == "":
        return fallback
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"id {value!r} is not a string or an integer")
    return str(value)


def _optional_str(rec: dict, key: str) -> str | None:
    v = rec.get(key)
    if v is None or v == "":
        return None
    if isinstance(v, (dict, list, bool)):
        raise ValueError(f"{key} {v!r} is not text")
    return v.isoformat() if hasattr(v, "isoformat") else str(v)


def _rows(f: _File, loc: str, rec: dict, *, dataset: str, rejects: Rejects, doc_ids: DocumentIds, text_column: str,
          id_column: str, language: str | None, cap: int, stats: dict | None) -> Iterator[tuple[str, dict]]:
    text = rec[text_column]
    if not isinstance(text, str):
        rejects.add(f.source, loc, "bad_field", f"{text_column} is {type(text).__name__}, expected text", str(rec)[:300])
        return
    if len(text) > cap // 4 and len(text.encode("utf-8")) > cap:  # a Parquet cell or a multi-line CSV field
        rejects.add(f.source, loc, "oversized_record", f"document over the cap of {cap} bytes "
                    "(EVENTATLAS_MAX_RECORD_BYTES)")
        return
    if not text.strip():
        rejects.add(f.source, loc, "empty_document", f"{text_column} is empty" if f.kind != "txt" else "empty file")
        return
    where = f.rel if f.kind == "txt" else f"{f.rel}:{loc.split()[-1]}"
    doc_id = _doc_id(rec.get(id_column), where) if f.kind != "txt" else f.rel
    if doc_ids.repeated(rejects, Path(f.source), loc, doc_id, str(rec)[:300]):
        return
    title, date = _optional_str(rec, "title"), _optional_str(rec, "date")
    lang = _optional_str(rec, "lang") or _optional_str(rec, "language") or language
    sents = split(text)
    if not sents:
        rejects.add(f.source, loc, "empty_document", "no sentence in the text")
        return
    doc_ids.add(Path(f.source), loc, doc_id)
    yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": title, "language": lang, "text": text,
                        "sentences": [text[s:e] for s, e, _, _ in sents], "source": f.rel, "split": None,
                        "extra": dumps({"date": date} if date else None)}
    for i, (s, e, ts, te) in enumerate(sents):
        yield "sentences", {"dataset": dataset, "doc_id": doc_id, "sent_idx": i, "text": text[s:e], "start": s,
                            "end": e, "token_starts": ts, "token_ends": te, "split": None}
        bump(stats, "tokens", len(ts))
    bump(stats, "sentences", len(sents))


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None,
         text_column: str = "text", id_column: str = "id", language: str | None = "en",
         **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    if opts:  # a misspelt option would otherwise be ignored without a word
        raise InputError(path, "-", f"unknown option {', '.join(sorted(opts))} for the text reader "
                         "(it takes text_column, id_column, language)")
    cap = max_record_bytes()
    doc_ids = DocumentIds()
    for f in _files(path, stats):
        bump(stats, f"{f.kind}_files")
        if f.kind == "txt":
            items = _txt(f, rejects, cap)
        elif f.kind == "jsonl":
            items = _jsonl(f, rejects, cap)
        elif f.kind == "csv":
            items = _csv(f, rejects, cap, text_column)
        else:
            items = _parquet(f, rejects, cap, text_column, id_column)
        required = ("text",) if f.kind == "txt" else (text_column,)
        for loc, rec in records(rejects, f.source, items, "document", required):
            with record_guard(rejects, f.source, loc, rec):
                yield from _rows(f, loc, rec, dataset=dataset, rejects=rejects, doc_ids=doc_ids,
                                 text_column="text" if f.kind == "txt" else text_column, id_column=id_column,
                                 language=language, cap=cap, stats=stats)
