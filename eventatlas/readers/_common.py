"""Helpers shared by the readers: strict text decoding, JSON lines, token/char
alignment and mention rows whose offsets are checked before they are yielded."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..errors import InputError
from ..io import Rejects, stable_id


def dumps(obj: Any) -> str | None:
    """JSON for the ``extra`` columns (None stays None, key order stable)."""
    if obj is None or obj == {}:
        return None
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str)  # default: a HugeInt in kept raw data


DEFAULT_MAX_RECORD_BYTES = 64 << 20  # 16x the largest real input file; a parsed record costs ~10-50x its bytes
MAX_RECORD_ENV = "EVENTATLAS_MAX_RECORD_BYTES"


def max_record_bytes() -> int:
    """The record size cap: one line of a line-based file, or a whole file read as one document (JSON,
    XML, .sgm). Past it the input is refused in one line before it is held in memory, so a reader's
    peak memory is bounded by a constant times this cap (env ``EVENTATLAS_MAX_RECORD_BYTES``)."""
    v = os.environ.get(MAX_RECORD_ENV)
    try:
        return int(v) if v else DEFAULT_MAX_RECORD_BYTES
    except ValueError:
        raise ValueError(f"{MAX_RECORD_ENV}={v!r} is not a number of bytes") from None


def _too_big(path: Any, where: str, cap: int) -> InputError:
    return InputError(path, where, f"record longer than {cap} bytes (cap EVENTATLAS_MAX_RECORD_BYTES); "
                      "refused before reading it whole; raise the cap if the input is trusted")


def read_bytes(path: str | os.PathLike) -> bytes:
    """A whole file read as one document, refused past the record cap (checked before reading)."""
    cap = max_record_bytes()
    if Path(path).stat().st_size > cap:
        raise _too_big(path, "-", cap)
    return Path(path).read_bytes()


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) with strict UTF-8: a bad byte names file and line; a line longer than
    the record cap is refused naming it, having held at most the cap in memory."""
    path = Path(path)
    cap = max_record_bytes()
    with open(path, "rb") as f:
        for n, raw in enumerate(iter(lambda: f.readline(cap + 1), b""), 1):
            if len(raw) > cap and not raw.endswith(b"\n"):
                raise _too_big(path, f"line {n}", cap)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, f"line {n}", f"not valid UTF-8 ({e.reason} at byte {e.start}); re-encode the file as UTF-8") from None
            if n == 1 and line.startswith("\ufeff"):
                line = line[1:]  # tolerate a BOM
            yield n, line.rstrip("\r\n")


def read_text(path: str | os.PathLike, data: bytes | None = None) -> str:
    """Whole file as strict UTF-8; the error names the line of the first bad byte."""
    path = Path(path)
    if data is None:
        data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(path, f"line {line}", f"not valid UTF-8 ({e.reason} at byte {e.start}); re-encode the file as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


_MAX_INT_DIGITS = 4000  # Python refuses to convert longer digit strings (sys.get_int_max_str_digits, 4300)


class HugeInt:
    """A JSON integer too long for Python: neither int nor str, so the field is a wrong-type value the
    reader rejects with its record (``int()`` on it would refuse the whole file)."""

    def __init__(self, digits: str):
        self.digits = digits

    def __str__(self) -> str:
        return f"{self.digits[:12]}...({len(self.digits)} digits)"

    __repr__ = __str__


def _parse_int(digits: str) -> int | HugeInt:
    return int(digits) if len(digits.lstrip("-")) <= _MAX_INT_DIGITS else HugeInt(digits)


def parse_json(text: str, path: Any, line: int | None = None) -> Any:
    """``json.loads`` with the two failures named as bad input: malformed JSON (its line and column) and
    nesting too deep for the parser (a RecursionError would be an internal failure)."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise InputError(path, f"line {line or e.lineno}", f"invalid JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise InputError(path, f"line {line}" if line else "-",
                         "JSON nested too deeply to parse (thousands of levels); not a record any reader reads") from None


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) per non-blank line; malformed JSON is fatal and names the line."""
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        yield n, parse_json(line, path, n)


def jsonl_items(path: str | os.PathLike) -> Iterator[tuple[str, Any]]:
    """``(location, record)`` of every line of a JSON-lines file, for :func:`records`."""
    for n, obj in iter_jsonl(path):
        yield f"line {n}", obj


def list_items(items: Sequence[Any], key: str = "") -> Iterator[tuple[str, Any]]:
    """``(location, record)`` of every element of a JSON list (``key[i]``), for :func:`records`."""
    for i, obj in enumerate(items):
        yield f"{key}[{i}]", obj


def records(rejects: Rejects, source: Any, items: Iterable[tuple[str, Any]], what: str,
            required: Sequence[str]) -> Iterator[tuple[str, dict]]:
    """The readers' one record loop: each ``(location, record)`` of ``source`` that is an object with every
    ``required`` field set; anything else is a reject naming source and location (``bad_record`` for a
    non-object, ``missing_field`` naming the fields), so no reader words these rejects its own way.
    The caller runs each record's body under :func:`record_guard`."""
    for loc, obj in items:
        if not isinstance(obj, dict):
            rejects.add(source, loc, "bad_record", f"{what} is {type(obj).__name__}, expected an object", str(obj)[:300])
            continue
        miss = require(obj, required)
        if miss:
            rejects.add(source, loc, "missing_field", f"{what} lacks {', '.join(miss)}", str(obj)[:300])
            continue
        yield loc, obj


def load_json(path: str | os.PathLike) -> Any:
    return parse_json(read_text(path), path)


def is_label(value: Any) -> bool:
    """A usable type name / label: a non-empty string (7, [] or {} in a type field is a wrong-type record)."""
    return isinstance(value, str) and bool(value.strip())


def parse_offset(text: Any) -> int | None:
    """A non-negative integer attribute (XML offsets): None for anything else, 5000 digits included."""
    return int(text) if isinstance(text, str) and text.isdigit() and len(text) <= 18 else None


def join_tokens(tokens: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Deterministic sentence from tokens: single spaces between them; char span of each token."""
    spans, pos = [], 0
    for i, t in enumerate(tokens):
        if i:
            pos += 1
        spans.append((pos, pos + len(t)))
        pos += len(t)
    return " ".join(tokens), spans


# Penn-Treebank escapes found in tokenised sources, with the characters they stand for.
_PTB = {
    "``": ('"', "\u201c", "``", "''"),
    "''": ('"', "\u201d", "''"),
    "-LRB-": ("(",), "-RRB-": (")",), "-LSB-": ("[",), "-RSB-": ("]",), "-LCB-": ("{",), "-RCB-": ("}",),
    "`": ("'", "\u2018"), "'": ("'", "\u2019"),
}
_UNK = {"unk", "<unk>", "[unk]"}


def align_tokens(sentence: str, tokens: Sequence[str], *, ignore_case: bool = False) -> list[tuple[int, int]] | None:
    """Char spans of ``tokens`` in ``sentence`` scanning left to right; None if any token is not found
    where expected (only whitespace may sit between tokens). PTB escapes (`` '' -LRB- ...) match the
    characters they stand for; an UNK token matches the next run of non-space characters."""
    hay = sentence.lower() if ignore_case else sentence
    if len(hay) != len(sentence):
        return None  # lower() changed the length (e.g. 'İ'): positions would be wrong
    spans, pos = [], 0
    for i, t in enumerate(tokens):
        while pos < len(hay) and hay[pos].isspace():
            pos += 1
        if not t:
            spans.append((pos, pos))
            continue
        cands = [t.lower() if ignore_case else t]
        key = t.upper() if t.upper().startswith("-") else t
        cands += [c.lower() if ignore_case else c for c in _PTB.get(key, ())]
        for c in cands if t.lower() not in _UNK else ():
            if hay.startswith(c, pos):
                spans.append((pos, pos + len(c)))
                pos += len(c)
                break
        else:
            if t.lower() in _UNK and pos < len(hay):
                end = pos
                while end < len(hay) and not hay[end].isspace():
                    end += 1
                nxt = tokens[i + 1].lower() if ignore_case and i + 1 < len(tokens) else (tokens[i + 1] if i + 1 < len(tokens) else "")
                k = hay.find(nxt, pos + 1, end) if nxt else -1
                if k > pos:
                    end = k  # the run also holds the next token (e.g. "G-ARUK," = UNK ",")
                spans.append((pos, end))
                pos = end
                continue
            return None
    return spans


def sentence_and_spans(sentence: str | None, tokens: Sequence[str], *, ignore_case: bool = False) -> tuple[str, list[tuple[int, int]], bool]:
    """Prefer the original sentence when the tokens align to it; else join the tokens.

    Returns (sentence, token spans, aligned_to_original)."""
    if sentence:
        spans = align_tokens(sentence, tokens, ignore_case=ignore_case)
        if spans is not None:
            return sentence, spans, True
    s, spans = join_tokens(tokens)
    return s, spans, False


def mention_id(dataset: str, doc_id: Any, sent_idx: Any, start: int, end: int, label: str | None) -> str:
    return stable_id(dataset, doc_id, sent_idx, start, end, label or "")


def check_span(rejects: Rejects, source: Any, location: Any, sentence: str, start: Any, end: Any, trigger: str | None, raw: Any = None) -> bool:
    """True when ``sentence[start:end] == trigger``; otherwise record an ``offset_mismatch`` reject."""
    ok = (
        isinstance(start, int)
        and isinstance(end, int)
        and 0 <= start < end <= len(sentence)
        and trigger is not None
        and sentence[start:end] == trigger
    )
    if not ok:
        got = sentence[start:end] if isinstance(start, int) and isinstance(end, int) else None
        rejects.add(source, location, "offset_mismatch", f"sentence[{start}:{end}] = {got!r} but trigger is {trigger!r}", raw)
    return ok


class MentionDedup:
    """Drops repeated mention ids (same dataset, doc, sentence, span, primary label)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.duplicates = 0

    def first(self, mid: str) -> bool:
        if mid in self.seen:
            self.duplicates += 1
            return False
        self.seen.add(mid)
        return True


class DocumentIds:
    """Document ids read so far: a repeat is a ``duplicate_document`` reject naming where the first was."""

    def __init__(self) -> None:
        self.where: dict[str, str] = {}

    def repeated(self, rejects: Rejects, source: Path, location: str, doc_id: str, raw: Any = None) -> bool:
        """True (and a reject) when ``doc_id`` was read before."""
        if doc_id not in self.where:
            return False
        rejects.add(source, location, "duplicate_document",
                    f"document id {doc_id!r} already read at {self.where[doc_id]}; this repeat is skipped", str(raw)[:300])
        return True

    def add(self, source: Path, location: str, doc_id: str) -> None:
        self.where.setdefault(doc_id, f"{Path(source).name} {location}")


def mention_row(
    dataset: str,
    doc_id: str,
    sent_idx: int | None,
    sentence: str,
    start: int,
    end: int,
    labels: list[str] | None,
    *,
    split: str | None = None,
    language: str | None = "en",
    scope: tuple[int, int] | None = None,
    arguments: list[dict] | None = None,
    extra: dict | None = None,
    mid: str | None = None,
) -> dict:
    labels = list(labels or [])
    return {
        "mention_id": mid or mention_id(dataset, doc_id, sent_idx, start, end, labels[0] if labels else ""),
        "dataset": dataset,
        "doc_id": str(doc_id),
        "sent_idx": sent_idx,
        "sentence": sentence,
        "trigger_start": start,
        "trigger_end": end,
        "trigger": sentence[start:end],
        "scope_start": scope[0] if scope else None,
        "scope_end": scope[1] if scope else None,
        "language": language,
        "split": split,
        "labels": labels,
        "arguments": arguments or [],
        "extra": dumps(extra),
    }


def bump(stats: dict | None, key: str, n: int = 1) -> None:
    if stats is not None:
        stats[key] = stats.get(key, 0) + n


def require(obj: Any, keys: Sequence[str]) -> list[str]:
    """Names of required keys missing from a dict record."""
    if not isinstance(obj, dict):
        return list(keys)
    return [k for k in keys if k not in obj or obj[k] is None]


def missing_trigger_fields(event: Any) -> list[str]:
    """Missing fields of a gen-arg style event mention ``{event_type, trigger: {start, end, text}}``
    (WikiEvents, TextEE)."""
    miss = require(event, ("event_type", "trigger"))
    trig = event.get("trigger") if isinstance(event, dict) else None
    return miss + (require(trig, ("start", "end", "text")) if isinstance(trig, dict) else ([] if miss else ["trigger"]))


def token_event_span(rejects: Rejects, source: Any, location: str, event: Any, spans: Sequence[tuple[int, int]],
                     sentence: str) -> tuple[int, int] | None:
    """Character span of a MAVEN-style event ``{text, start, end, event_type}`` with end-exclusive token
    offsets into ``spans`` (from :func:`join_tokens`); None (and a reject saying why) when unusable."""
    miss = require(event, ("start", "end", "text", "event_type")) if isinstance(event, dict) else ["all fields"]
    if miss:
        rejects.add(source, location, "missing_field", f"event lacks {', '.join(miss)}", event)
        return None
    if not is_label(event["event_type"]):
        rejects.add(source, location, "bad_field", f"event_type {event['event_type']!r} is not a type name", event)
        return None
    s, t = event["start"], event["end"]
    if not (isinstance(s, int) and isinstance(t, int) and 0 <= s < t <= len(spans)):
        rejects.add(source, location, "bad_offsets", f"token span [{s}, {t}) outside {len(spans)} tokens", event)
        return None
    cs, ce = spans[s][0], spans[t - 1][1]
    if not check_span(rejects, source, location, sentence, cs, ce, event["text"], event):
        return None
    return cs, ce


# Python errors a malformed record provokes (a string where a list belongs, "x" where an offset
# belongs, a list where an id belongs); inside a reader they mean bad input, not a bug.
DATA_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError)


@contextlib.contextmanager
def record_guard(rejects: Rejects, source: Any, location: Any, raw: Any = None) -> Iterator[None]:
    """Turn a wrong-type field or non-integer offset in one record into a ``bad_record`` reject that
    names file and record, so the ingest goes on with the next record (InputError passes through).
    Rows the record yielded before the failure stay (they were valid); the reject counts it."""
    try:
        yield
    except InputError:
        raise
    except DATA_ERRORS as e:
        rejects.add(source, location, "bad_record", f"{type(e).__name__}: {e}", str(raw)[:300] if raw is not None else None)


# The id column of each table whose rows must be unique, and the reject reason of a repeat.
UNIQUE_IDS = {"documents": ("doc_id", "duplicate_document"), "event_types": ("type_id", "duplicate_type"),
              "mentions": ("mention_id", "duplicate_mention")}


def unique_ids(rows: Iterator[tuple[str, dict]], rejects: Rejects, path: Any) -> Iterator[tuple[str, dict]]:
    """Every reader's output passes through here (``ingest`` drives it), so no reader needs its own copy.

    A row whose id (``UNIQUE_IDS``) was read before is dropped with a reject naming where the first one
    came from. A repeated document takes its rows with it: its sentences (silently) and the mentions (and mention
    relations) that follow it with its ``doc_id``, up to the next document, are dropped as ``duplicate_document`` rejects,
    so a second file under one DOCID cannot attach its mentions to the first file's text. Readers that
    yield documents after their mentions key them in a dict, so no repeat reaches this point from them.
    A row may carry ``_source`` (file) for the reject; the tables ignore keys outside their schema."""
    first: dict[str, dict[str, str]] = {t: {} for t in UNIQUE_IDS}
    repeat_doc: str | None = None  # doc id of the repeated document whose rows are being dropped
    repeat_where = ""
    dropped_mentions: set[str] = set()
    for table, row in rows:
        if table == "documents":
            repeat_doc = None
        if table == "sentences" and repeat_doc is not None and row.get("doc_id") == repeat_doc:
            continue  # the repeated document's one reject stands for its sentences
        where = str(row.get("_source") or row.get("source") or path)
        if table in ("mentions", "mention_relations") and repeat_doc is not None and (
                row.get("doc_id") == repeat_doc
                or dropped_mentions & {row.get("source_mention_id"), row.get("target_mention_id")}):
            if table == "mentions":
                dropped_mentions.add(row["mention_id"])
            rejects.add(repeat_where, f"{table} of document {repeat_doc!r}", "duplicate_document",
                        f"belongs to the repeat of document {repeat_doc!r}; dropped with it", str(row)[:300])
            continue
        if table in UNIQUE_IDS:
            col, reason = UNIQUE_IDS[table]
            key = row.get(col)
            seen = first[table]
            if key in seen:
                rejects.add(where, f"{col} {key!r}", reason, f"{col} {key!r} already read from {seen[key]}; this repeat is skipped",
                            str(row)[:300])
                if table == "documents":
                    repeat_doc, repeat_where = key, where
                continue
            seen[key] = where
        yield table, row
