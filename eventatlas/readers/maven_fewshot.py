"""MAVEN few-shot subset: ``dev.json`` = ``{type: [{id, tokens, events:[{text, start, end, event_type}]}]}``
(token offsets, end-exclusive), with ``maven_definition.json`` ({type: definition}) and
``event_split.json`` ({train|dev|test: [types]}) beside it or given as ``definitions=`` / ``event_split=``.

There is no original sentence text: the sentence is the space-joined tokens. One document per
instance id (``doc_id`` = id, ``sent_idx`` 0). An instance listed under several types and the
same event repeated become one mention (deduplicated on the mention id); the type lists it was
listed under go to ``extra.listed_under``. A mention's split is its type's split from
``event_split.json`` (else the file's stem). ``stats``: ``instances`` (574 in the shared dev.json).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import bump, is_label, join_tokens, list_items, load_json, mention_row, record_guard, records, token_event_span
from .maven import load_definitions

DEFAULT_DATASET = "maven_fewshot"


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, definitions=None, event_split=None,
         stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files = sorted(p for p in path.glob("*.json") if p.name not in ("maven_definition.json", "event_split.json")) if path.is_dir() else [path]
    if not files:
        raise InputError(path, "-", "no few-shot *.json file in directory")
    base = path if path.is_dir() else path.parent
    if definitions is None and (base / "maven_definition.json").exists():
        definitions = base / "maven_definition.json"
    if event_split is None and (base / "event_split.json").exists():
        event_split = base / "event_split.json"
    defs = load_definitions(Path(definitions) if definitions else None)
    split_of: dict[str, str] = {}
    if event_split:
        sp = load_json(event_split)
        if not isinstance(sp, dict):
            raise InputError(event_split, "top level", "expected {split: [types]}")
        for s, ts in sp.items():
            for i, t in enumerate(ts if isinstance(ts, list) else [ts]):
                if is_label(t):
                    split_of[t] = s
                else:
                    rejects.add(event_split, f"{s}[{i}]", "bad_record", f"{t!r} is not a type name", str(t)[:300])
    rows: dict[str, dict] = {}  # mention_id -> row; kept in memory (a few thousand) to merge listed_under
    listed: dict[str, set[str]] = {}
    docs: dict[str, tuple[str, str]] = {}
    types: set[str] = set()
    for f in files:
        data = load_json(f)
        if not isinstance(data, dict):
            raise InputError(f, "top level", "expected {type: [instance, ...]}")
        for key, insts in data.items():
            if not isinstance(insts, list):
                rejects.add(f, key, "bad_record", f"expected a list of instances under {key!r}, got {type(insts).__name__}",
                            str(insts)[:300])
                continue
            for loc, inst in records(rejects, f, list_items(insts, key), "instance", ("id", "tokens", "events")):
                with record_guard(rejects, f, loc, inst):
                    bump(stats, "instances")
                    doc_id = str(inst["id"])
                    sentence, spans = join_tokens(inst["tokens"])
                    if doc_id in docs and docs[doc_id][0] != sentence:
                        rejects.add(f, loc, "conflicting_instance", f"id {doc_id} seen with different tokens", inst["id"])
                        continue
                    docs.setdefault(doc_id, (sentence, f.name))
                    for ei, e in enumerate(inst["events"]):
                        span = token_event_span(rejects, f, f"{loc}.events[{ei}]", e, spans, sentence)
                        if span is None:
                            continue
                        cs, ce = span
                        et = e["event_type"]
                        types.add(et)
                        row = mention_row(dataset, doc_id, 0, sentence, cs, ce, [et], split=split_of.get(et, f.stem))
                        mid = row["mention_id"]
                        rows.setdefault(mid, row)
                        listed.setdefault(mid, set()).add(key)
    for doc_id, (sentence, src) in docs.items():
        yield "documents", {"dataset": dataset, "doc_id": doc_id, "language": "en", "sentences": [sentence], "source": src, "split": None}
    for mid, row in rows.items():
        row["extra"] = json.dumps({"listed_under": sorted(listed[mid])}, ensure_ascii=False)
        yield "mentions", row
    for t in sorted(types | set(defs)):
        yield "event_types", {"dataset": dataset, "type_id": t, "name": t.replace("_", " "), "definition": defs.get(t),
                              "parent_id": None, "ontology": "MAVEN",
                              "extra": json.dumps({"fewshot_split": split_of[t]}) if t in split_of else None}
