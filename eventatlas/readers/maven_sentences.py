"""MAVEN as a sentence-level list (e.g. ``maven/subset/maven_subset_a.json``):
``[{"id", "tokens", "events": [{"text", "start", "end", "event_type"}]}]``, token offsets end-exclusive.

There is no document grouping and no original text: each entry is a document of one sentence (the
space-joined tokens, ``doc_id`` = its id, ``sent_idx`` 0). Sentences without events are kept as
documents (``extra.n_events`` = 0): they are the "no event" candidates retrieval evaluations sample
from. Type names carry no supertype; definitions come from ``maven_definition.json`` when it lies in
the same folder, in a sibling ``fewshot/`` folder, or is given as ``definitions=``. ``stats``:
``sentences``, ``sentences_without_events``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import MentionDedup, bump, join_tokens, list_items, load_json, mention_row, record_guard, records, token_event_span
from .maven import load_definitions

DEFAULT_DATASET = "maven_sentences"


def _definitions_near(path: Path) -> Path | None:
    for cand in (path.parent / "maven_definition.json", path.parent.parent / "fewshot" / "maven_definition.json"):
        if cand.exists():
            return cand
    return None


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, definitions=None, stats: dict | None = None,
         **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files = sorted(p for p in path.glob("*.json") if p.name != "maven_definition.json") if path.is_dir() else [path]
    if not files:
        raise InputError(path, "-", "no *.json sentence list in directory")
    defs = load_definitions(Path(definitions) if definitions else _definitions_near(files[0]))
    dedup = MentionDedup()
    types: set[str] = set()
    seen_ids: set[str] = set()
    for f in files:
        data = load_json(f)
        if not isinstance(data, list):
            raise InputError(f, "top level", "expected a JSON list of {id, tokens, events} sentences")
        for loc, inst in records(rejects, f, list_items(data), "sentence", ("id", "tokens", "events")):
            with record_guard(rejects, f, loc, inst):
                if not isinstance(inst["tokens"], list) or not all(isinstance(t, str) for t in inst["tokens"]):
                    rejects.add(f, loc, "bad_tokens", "tokens must be a list of strings", inst.get("id"))
                    continue
                doc_id = str(inst["id"])
                if doc_id in seen_ids:
                    rejects.add(f, loc, "duplicate_document", f"sentence id {doc_id} appears again", inst["id"])
                    continue
                seen_ids.add(doc_id)
                sentence, spans = join_tokens(inst["tokens"])
                events = inst["events"] if isinstance(inst["events"], list) else []
                bump(stats, "sentences")
                if not events:
                    bump(stats, "sentences_without_events")
                yield "documents", {"dataset": dataset, "doc_id": doc_id, "language": "en", "sentences": [sentence],
                                    "source": f.name, "split": f.stem, "extra": json.dumps({"n_events": len(events)})}
                for ei, e in enumerate(events):
                    span = token_event_span(rejects, f, f"{loc}.events[{ei}]", e, spans, sentence)
                    if span is None:
                        continue
                    cs, ce = span
                    row = mention_row(dataset, doc_id, 0, sentence, cs, ce, [e["event_type"]], split=f.stem)
                    if not dedup.first(row["mention_id"]):
                        bump(stats, "duplicate_mentions")
                        continue
                    types.add(e["event_type"])
                    yield "mentions", row
    for t in sorted(types):
        yield "event_types", {"dataset": dataset, "type_id": t, "name": t.replace("_", " "), "definition": defs.get(t),
                              "parent_id": None, "ontology": "MAVEN", "extra": None}
