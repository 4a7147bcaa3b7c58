"""TextEE (Huang et al., ACL Findings 2024): the processed output of its dataset scripts.

Layout taken from github.com/ej0cl6/TextEE at commit 25d5dcacdd748ed7bdbbdffbde0f628adc6704ba:
``data/README.md`` ("Processed Data Format"), ``data/preprocessing/<ds>/process_<ds>.sh`` and the
scripts they run (``ace05/process_ace05_en.py``, ``ere/process_ere_en.py``, ``maven/process_maven.py``,
``wikievents/process_wikievents.py``, ``casie/process_casie.py``, ``genia2011/process_genia.py``,
``muc4/process_muc4.py``, ... each ending in ``save_data``), ``data/preprocessing/random_split_data.py``.

* Every script writes ``processed_data/<name>/splitN/{train,dev,test}.json`` (N = 1..5: five
  re-partitions of the same documents by document id); despite the suffix each file is JSON lines.
  ``<name>`` is one of :data:`KNOWN`. The split id lists (``splitN/{train,dev,test}.txt`` of the
  TextEE repository) are inputs of the scripts and are not written beside the output.
* One window ("instance") a line: ``{doc_id, wnd_id, text, lang, tokens, entity_mentions[{id,
  entity_type, text, start, end}], event_mentions[{id, event_type, trigger{text, start, end},
  arguments[{entity_id, role, text, start, end}]}], relation_mentions[{id, relation_type,
  arguments[{entity_id, role, text, start, end}]}] (optional)}``; ``start``/``end`` are end-exclusive
  token indices into the window's ``tokens``.
* Windows: a sentence (ACE, RichERE, MAVEN) or a run of sentences (WikiEvents, CASIE, GENIA, MLEE,
  MUC-4); ``wnd_id`` is ``<doc_id>-<i>`` or ``<doc_id>_<i>`` for most sets. The scripts sort windows
  by ``doc_id`` (a stable sort), so a document's windows are consecutive lines in window order.

Mapping to the schema: the windows of one ``doc_id`` are joined into one ``documents`` row whose
``sentences`` are the window texts in window order (by the ``wnd_id`` index when every window of the
document has one, else file order); mentions carry ``sent_idx`` = that position and the window text
as ``sentence``. TextEE keeps no character offsets between windows, so ``documents.text`` stays
empty (the join needs only the order). Token offsets become character offsets into the window text
(``text`` when the tokens align to it, else the space-joined tokens). Event types: TextEE's
``Type:Subtype`` becomes ``Type.Subtype`` (the ACE ids of the ``ace2005`` reader), parent = the
first dotted segment; the original is kept in ``event_types.extra.textee_type``. Arguments keep
role, text, entity id and (when the span matches its text) offsets; entity and relation mentions go
to ``documents.extra``. The manifest's ``stats.textee`` records the TextEE dataset, split, window
join, type inventory and whether a protocol is registered for it.

Reader ``textee`` takes any TextEE dataset (named by the directory above ``splitN``); the
``textee_<name>`` readers (registry entries with protocols) refuse another dataset's output.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from ..io import Rejects
from .ace2005 import TYPES as ACE_TYPES  # ACE definitions, for the ACE-family sets
from ._common import (DocumentIds, MentionDedup, bump, check_span, dumps, jsonl_items, mention_row, missing_trigger_fields, record_guard,
                      records, sentence_and_spans)

DEFAULT_DATASET = "textee"
SPLIT_FILES = {"train.json": "train", "dev.json": "dev", "test.json": "test"}
_SPLIT_DIR = re.compile(r"^split\d+$")
_WS = re.compile(r"\s+")

# TextEE's output directory names -> (eventatlas reader with a registered protocol, event-type ontology,
# why there is no protocol). A protocol is registered where this project has one for the same type
# inventory (ACE 2005, MAVEN, WikiEvents: datasets/registry.yaml); the others have no published
# seen/unseen type split or type -> FrameNet mapping the project could reuse.
_BIO = "biomedical event types with no FrameNet mapping or published type split"
KNOWN: dict[str, tuple[str | None, str, str]] = {
    "ace05-en": ("textee_ace05", "ACE", ""),
    "maven": ("textee_maven", "MAVEN", ""),
    "wikievents": ("textee_wikievents", "KAIROS", ""),
    "richere-en": (None, "other", "RichERE's 38 types have no published type split or FrameNet mapping"),
    "m2e2": (None, "ACE", "8 ACE types, too few for the ACE 10-seen/23-unseen split"),
    "mee-en": (None, "other", "no published type split or FrameNet mapping for MEE's types"),
    "geneva": (None, "other", "GENEVA's types derive from FrameNet, but no verified type -> frame table is shipped"),
    "fewevent": (None, "other", "no published unseen-type split for FewEvent's 100 types"),
    "rams": (None, "other", "no FrameNet mapping or type split published for RAMS's 139 AIDA types"),
    "casie": (None, "other", "5 cybersecurity event types: too few for a seen/unseen split"),
    "phee": (None, "other", "2 pharmacovigilance event types: too few for a seen/unseen split"),
    "speed": (None, "other", "7 epidemic event types: too few for a seen/unseen split"),
    "genia2011": (None, "other", _BIO),
    "genia2013": (None, "other", _BIO),
    "mlee": (None, "other", _BIO),
    "muc4": (None, "other", "template filling: TextEE writes one 'Dummy' event per window, no triggers or types"),
}


def _same(a: str, b: Any) -> bool:
    """Span text equals the source's text but for whitespace: windows joined from tokens read
    ``Al - Monitor`` where the source says ``Al-Monitor``; ACE text may break a line inside a span."""
    return isinstance(b, str) and (a == b or _WS.sub("", a) == _WS.sub("", b))


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def type_id(event_type: str) -> str:
    """eventatlas id of a TextEE event type: ``Conflict:Attack`` -> ``Conflict.Attack``."""
    return event_type.replace(":", ".")


def locate(path: Path) -> tuple[list[tuple[Path, str]], str]:
    """(split files with their split, TextEE dataset name from the directories) of ``path``: a
    ``splitN`` directory or one of its files. Refuses anything else in one line."""
    if path.is_dir():
        files = [(path / n, s) for n, s in SPLIT_FILES.items() if (path / n).is_file()]
        if not files:
            subs = sorted(p.name for p in path.iterdir() if p.is_dir() and _SPLIT_DIR.match(p.name))
            if subs:
                raise InputError(path, "-", f"holds TextEE splits {', '.join(subs)}: pass one of them (e.g. {path / subs[0]}); "
                                 "each is a re-partition of the same documents")
            raise InputError(path, "-", f"none of TextEE's split files {', '.join(SPLIT_FILES)} in this directory")
        base = path
    else:
        if path.name not in SPLIT_FILES:
            raise InputError(path, "-", f"not a TextEE split file: the split is named by the file ({', '.join(SPLIT_FILES)})")
        files, base = [(path, SPLIT_FILES[path.name])], path.parent
    name = base.parent.name if _SPLIT_DIR.match(base.name) else base.name
    return files, name


class _Doc:
    """The windows of one document read so far (kept until the next document starts)."""

    def __init__(self, doc_id: str, source: Path, split: str):
        self.doc_id, self.source, self.split = doc_id, source, split
        self.windows: list[dict] = []


def _window(rejects: Rejects, f: Path, loc: str, rec: dict, stats: dict | None) -> dict | None:
    """A window's text, token spans and prepared events/entities/relations; None (and a reject) when unusable."""
    toks = rec["tokens"]
    if not isinstance(toks, list) or not toks or not all(isinstance(t, str) for t in toks):
        rejects.add(f, loc, "bad_field", "tokens must be a non-empty list of strings", str(rec)[:300])
        return None
    text, spans, aligned = sentence_and_spans(rec.get("text") if isinstance(rec.get("text"), str) else None, toks)
    if not aligned:
        bump(stats, "sentence_from_tokens")

    def char_span(s: Any, e: Any) -> tuple[int, int] | None:
        if type(s) is int and type(e) is int and 0 <= s < e <= len(spans):
            return spans[s][0], spans[e - 1][1]
        return None

    def located(obj: Any, what: str) -> tuple[int, int] | None | bool:
        """Char span of an argument / entity whose token span holds its text (but for whitespace); None
        when it does not (kept without offsets), False when it is no record at all (both counted)."""
        if not isinstance(obj, dict):
            bump(stats, f"{what}_malformed")
            return False
        span = char_span(obj.get("start"), obj.get("end"))
        if span is None or not _same(text[span[0]:span[1]], obj.get("text")):
            bump(stats, f"{what}_unlocated")
            return None
        return span

    events = []
    for ei, ev in enumerate(rec.get("event_mentions") or []):
        eloc = f"{loc} event_mentions[{ei}]"
        miss = missing_trigger_fields(ev)
        if miss:
            rejects.add(f, eloc, "missing_field", f"event lacks {', '.join(miss)}", ev)
            continue
        trig = ev["trigger"]
        if not isinstance(ev["event_type"], str) or not ev["event_type"]:
            rejects.add(f, eloc, "bad_field", f"event_type {ev['event_type']!r} is not a type name", ev)
            continue
        cs = char_span(trig["start"], trig["end"])
        if cs is None:
            rejects.add(f, eloc, "bad_offsets", f"trigger token span [{trig['start']!r}, {trig['end']!r}) outside the window's {len(spans)} tokens", ev)
            continue
        got = text[cs[0]:cs[1]]
        if not check_span(rejects, f, eloc, text, cs[0], cs[1], got if _same(got, trig["text"]) else trig["text"], ev):
            continue
        args = []
        for a in ev.get("arguments") or []:
            span = located(a, "arguments")
            if span is not False:
                args.append({"role": _str(a.get("role")), "text": text[span[0]:span[1]] if span else _str(a.get("text")),
                             "start": span[0] if span else None, "end": span[1] if span else None,
                             "entity_id": None if a.get("entity_id") is None else str(a["entity_id"])})
        events.append({"span": cs, "type": ev["event_type"], "args": args,
                       "extra": {"event_id": ev.get("id"), "token_span": [trig["start"], trig["end"]]}})
    ents = []
    for en in rec.get("entity_mentions") or []:
        span = located(en, "entities")
        if span is not False:
            ents.append({"id": None if en.get("id") is None else str(en["id"]), "type": _str(en.get("entity_type")),
                         "text": _str(en.get("text")), "start": span[0] if span else None, "end": span[1] if span else None})
    rels = [{"id": r.get("id"), "type": r.get("relation_type"),
             "args": [[a.get("role"), a.get("entity_id")] for a in r.get("arguments") or [] if isinstance(a, dict)]}
            for r in rec.get("relation_mentions") or [] if isinstance(r, dict)]
    return {"wnd_id": str(rec["wnd_id"]), "text": text, "lang": rec.get("lang") if isinstance(rec.get("lang"), str) else "en",
            "events": events, "entities": ents, "relations": rels}


def _order(doc: _Doc) -> tuple[list[dict], str]:
    """The document's windows in window order: by the ``<doc_id>[-_]<i>`` index when all have one."""
    pat = re.compile(re.escape(doc.doc_id) + r"[-_](\d+)$")
    idx = [pat.match(w["wnd_id"]) for w in doc.windows]
    if all(idx):
        return sorted(doc.windows, key=lambda w: int(pat.match(w["wnd_id"]).group(1))), "wnd_id index"
    return doc.windows, "file order"


def _flush(doc: _Doc, dataset: str, dedup: MentionDedup, types: dict[str, str], stats: dict | None,
           order_counts: dict[str, int]) -> Iterator[tuple[str, dict]]:
    wins, how = _order(doc)
    order_counts[how] = order_counts.get(how, 0) + 1
    if wins != doc.windows:
        bump(stats, "windows_reordered")
    lang = wins[0]["lang"]
    ents = [{**e, "sent_idx": i} for i, w in enumerate(wins) for e in w["entities"]]
    rels = [{**r, "sent_idx": i} for i, w in enumerate(wins) for r in w["relations"]]
    yield "documents", {"dataset": dataset, "doc_id": doc.doc_id, "title": None, "language": lang, "text": None,
                        "sentences": [w["text"] for w in wins], "source": doc.source.name, "split": doc.split,
                        "extra": dumps({"wnd_ids": [w["wnd_id"] for w in wins], "entity_mentions": ents or None,
                                        "relation_mentions": rels or None})}
    for i, w in enumerate(wins):
        etype = {e["id"]: e["type"] for e in w["entities"] if e["id"] is not None}
        for ev in w["events"]:
            label = type_id(ev["type"])
            types.setdefault(label, ev["type"])
            arg_types = {a["entity_id"]: etype[a["entity_id"]] for a in ev["args"] if a["entity_id"] in etype}
            row = mention_row(dataset, doc.doc_id, i, w["text"], ev["span"][0], ev["span"][1], [label], split=doc.split,
                              language=w["lang"], arguments=ev["args"],
                              extra={**ev["extra"], "wnd_id": w["wnd_id"], **({"arg_entity_types": arg_types} if arg_types else {})})
            if dedup.first(row["mention_id"]):
                yield "mentions", row


def _read(path, *, dataset: str, rejects: Rejects, stats: dict | None, expect: str | None) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files, found = locate(path)
    name = found
    if expect is not None:
        if found in KNOWN and found != expect:
            other = KNOWN[found][0] or "textee"
            raise InputError(path, "-", f"this is TextEE's {found} output, not {expect}: ingest it with `{other}`")
        name = expect
    reader_name, ontology, why = KNOWN.get(name, (None, "other", f"{name!r} is not one of TextEE's dataset directories"))
    dedup, doc_ids = MentionDedup(), DocumentIds()
    wnd_seen: dict[str, str] = {}
    types: dict[str, str] = {}
    order_counts: dict[str, int] = {}
    n_windows = 0
    for f, split in files:
        cur: _Doc | None = None
        for loc, rec in records(rejects, f, jsonl_items(f), "window", ("doc_id", "wnd_id", "tokens", "event_mentions")):
            done: _Doc | None = None  # the previous document, complete once another one starts
            with record_guard(rejects, f, loc, rec):
                doc_id, wnd_id = str(rec["doc_id"]), str(rec["wnd_id"])
                if wnd_id in wnd_seen:
                    rejects.add(f, loc, "duplicate_window", f"window id {wnd_id!r} already read at {wnd_seen[wnd_id]}; this repeat is skipped", str(rec)[:300])
                    continue
                if cur is None or doc_id != cur.doc_id:
                    if doc_ids.repeated(rejects, f, loc, doc_id, rec):  # names where its windows were read
                        continue
                    done, cur = cur, None
                win = _window(rejects, f, loc, rec, stats)
                if win is not None:
                    wnd_seen[wnd_id] = f"{f.name} {loc}"
                    if cur is None:
                        doc_ids.add(f, loc, doc_id)
                        cur = _Doc(doc_id, f, split)
                    cur.windows.append(win)
                    n_windows += 1
            if done is not None:
                yield from _flush(done, dataset, dedup, types, stats, order_counts)
        if cur is not None:
            yield from _flush(cur, dataset, dedup, types, stats, order_counts)
    bump(stats, "duplicate_mentions", dedup.duplicates)
    labels = set(types)
    roots = {t.split(".", 1)[0] for t in labels if "." in t}
    names = type_names(sorted(labels | roots))
    for t in sorted(labels | roots):
        parts = t.split(".")
        yield "event_types", {"dataset": dataset, "type_id": t, "name": names[t],
                              "definition": ACE_TYPES.get(t) if ontology == "ACE" else None,
                              "parent_id": parts[0] if len(parts) > 1 else None, "ontology": ontology,
                              "extra": dumps({"textee_type": types[t]} if t in types and types[t] != t else None)}
    if stats is not None:
        stats["textee"] = {
            "dataset": name, "split_dir": (path if path.is_dir() else path.parent).name, "files": [f.name for f, _ in files],
            "windows": n_windows, "documents": sum(order_counts.values()),
            "window_join": "windows of a doc_id joined into one document: documents.sentences = window texts, "
                           "mentions.sent_idx = window position; documents.text empty (TextEE keeps no offsets between windows)",
            "window_order": order_counts, "event_types": sorted(labels),
            "protocol": (f"none registered for {name}: {why}; give a method's parameters explicitly" if not reader_name
                         else f"registered: {reader_name}" if expect else f"registered for reader {reader_name}: ingest with it to use it"),
        }


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    """Any TextEE dataset: the name comes from the directory above ``splitN``."""
    return _read(path, dataset=dataset, rejects=rejects, stats=stats, expect=None)


GENERIC_LEAVES = {"unspecified", "n/a", "na", "other", "none", "generic", "general"}


def _words(part: str) -> str:
    return part.replace("_", " ").replace("-", " ")


def type_names(type_ids: list[str]) -> dict[str, str]:
    """A readable name per dotted type id: its leaf (``Conflict.Attack.DetonateExplode`` -> DetonateExplode),
    but the path without a generic leaf where the leaf says nothing (``Life.Die.Unspecified`` -> Life Die;
    RAMS's ``conflict.attack.n/a`` -> conflict attack), and the whole path where two types would share a name,
    so name-based linking never sees one name for many types."""
    def short(t: str) -> str:
        parts = t.split(".")
        while len(parts) > 1 and parts[-1].strip().lower() in GENERIC_LEAVES:
            parts = parts[:-1]
        return _words(parts[-1] if len(parts) == 1 or t.split(".")[-1] == parts[-1] else " ".join(parts))

    first = {t: short(t) for t in type_ids}
    count: dict[str, int] = {}
    for n in first.values():
        count[n.lower()] = count.get(n.lower(), 0) + 1
    return {t: (n if count[n.lower()] == 1 else " ".join(_words(p) for p in t.split(".")))
            for t, n in first.items()}


def reader_for(name: str) -> Callable[..., Iterator[tuple[str, dict]]]:
    """The ``read`` of a ``textee_<name>`` registry entry: TextEE's ``name`` output only."""

    def read_one(path, *, dataset: str = KNOWN[name][0], rejects: Rejects, stats: dict | None = None, **opts):
        return _read(path, dataset=dataset, rejects=rejects, stats=stats, expect=name)

    read_one.__doc__ = f"TextEE's {name} output (processed_data/{name}/splitN); refuses another dataset's."
    return read_one
