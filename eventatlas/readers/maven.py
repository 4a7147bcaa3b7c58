"""MAVEN (Wang et al. 2020) official release: ``train.jsonl``, ``valid.jsonl``, ``test.jsonl``.

One document a line: ``{id, title, content:[{sentence, tokens}], events:[{id, type, type_id,
mention:[{id, trigger_word, sent_id, offset:[s, e)}]}], negative_triggers:[...]}``; the test
file has ``candidates`` (unlabelled; negatives among them) instead of events.

Sentences: the original ``sentence`` text, tokens aligned to it (fallback: space-joined tokens,
counted as ``sentence_from_tokens``). Labelled mentions get ``labels=[type]``; test candidates
get ``labels=[]`` and split ``test``. Negative triggers are skipped and counted
(``negative_triggers``). Mentions of one event (MAVEN's event coreference) are linked with
``coref`` relations to the event's first mention. Type definitions come from
``definitions=<maven_definition.json>`` (``{type: text}``) when given or present beside the data.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import (DocumentIds, MentionDedup, bump, check_span, dumps, is_label, jsonl_items, load_json, mention_row, record_guard,
                      records, require, sentence_and_spans)

DEFAULT_DATASET = "maven"
ONTOLOGY = "MAVEN"
SPLIT_FILES = {"train.jsonl": "train", "valid.jsonl": "valid", "test.jsonl": "test"}


def _files(path: Path) -> list[tuple[Path, str]]:
    if path.is_dir():
        found = [(path / n, s) for n, s in SPLIT_FILES.items() if (path / n).exists()]
        if not found:
            raise InputError(path, "-", f"none of {', '.join(SPLIT_FILES)} in directory")
        return found
    return [(path, SPLIT_FILES.get(path.name, next((s for n, s in SPLIT_FILES.items() if s in path.stem), "all")))]


def load_definitions(path: Path | None) -> dict[str, str]:
    if not path:
        return {}
    d = load_json(path)
    if not isinstance(d, dict):
        raise InputError(path, "top level", "expected {type: definition}")
    return {str(k): str(v) for k, v in d.items()}


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, definitions=None, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    if definitions is None:
        base = path if path.is_dir() else path.parent
        cand = [base / "maven_definition.json", base / "fewshot" / "maven_definition.json"]
        definitions = next((c for c in cand if c.exists()), None)
    defs = load_definitions(Path(definitions) if definitions else None)
    dedup = MentionDedup()
    types: dict[str, int | None] = {}
    doc_ids = DocumentIds()
    for f, split in _files(path):
        for loc, doc in records(rejects, f, jsonl_items(f), "document", ("id", "content")):
            with record_guard(rejects, f, loc, doc):
                doc_id = str(doc["id"])
                if doc_ids.repeated(rejects, f, loc, doc_id, doc):
                    continue
                doc_ids.add(f, loc, doc_id)
                if not isinstance(doc["content"], list):
                    rejects.add(f, loc, "bad_field", f"content is {type(doc['content']).__name__}, expected a list of sentences", str(doc)[:300])
                    continue
                sents = []
                for si, s in enumerate(doc["content"]):
                    if require(s, ("tokens",)):
                        sents.append(None)
                        rejects.add(f, f"{loc} content[{si}]", "missing_field", "sentence lacks tokens", s)
                        continue
                    text, spans, aligned = sentence_and_spans(s.get("sentence"), s["tokens"])
                    if not aligned:
                        bump(stats, "sentence_from_tokens")
                    sents.append((text, spans))
                yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": doc.get("title"), "language": "en",
                                    "sentences": [s[0] if s else None for s in sents], "source": f.name, "split": split, "extra": None}

                def one(m, mloc, labels, extra):
                    miss = require(m, ("sent_id", "offset", "trigger_word"))
                    if miss:
                        rejects.add(f, mloc, "missing_field", f"mention lacks {', '.join(miss)}", m)
                        return None
                    si, off = m["sent_id"], m["offset"]
                    if not (isinstance(si, int) and 0 <= si < len(sents) and sents[si]):
                        rejects.add(f, mloc, "bad_sentence", f"sent_id {si!r} not in document ({len(sents)} sentences)", m)
                        return None
                    text, spans = sents[si]
                    if not (isinstance(off, list) and len(off) == 2 and all(isinstance(x, int) for x in off) and 0 <= off[0] < off[1] <= len(spans)):
                        rejects.add(f, mloc, "bad_offsets", f"offset {off!r} outside {len(spans)} tokens", m)
                        return None
                    cs, ce = spans[off[0]][0], spans[off[1] - 1][1]
                    if not check_span(rejects, f, mloc, text, cs, ce, m["trigger_word"], m):
                        return None
                    return mention_row(dataset, doc_id, si, text, cs, ce, labels, split=split,
                                       extra={**extra, "source_mention_id": m.get("id"), "token_span": off})

                for ei, ev in enumerate(doc.get("events") or []):
                    miss = require(ev, ("type", "mention"))
                    if miss:
                        rejects.add(f, f"{loc} events[{ei}]", "missing_field", f"event lacks {', '.join(miss)}", ev)
                        continue
                    if not is_label(ev["type"]):
                        rejects.add(f, f"{loc} events[{ei}]", "bad_record", f"type {ev['type']!r} is not a type name", ev)
                        continue
                    types.setdefault(ev["type"], ev.get("type_id"))
                    first = None
                    for mi, m in enumerate(ev["mention"]):
                        row = one(m, f"{loc} events[{ei}].mention[{mi}]", [ev["type"]], {"event_id": ev.get("id"), "type_id": ev.get("type_id")})
                        if row is None or not dedup.first(row["mention_id"]):
                            continue
                        yield "mentions", row
                        if first is None:
                            first = row["mention_id"]
                        else:
                            yield "mention_relations", {"dataset": dataset, "source_mention_id": row["mention_id"], "target_mention_id": first, "relation": "coref"}
                bump(stats, "negative_triggers", len(doc.get("negative_triggers") or []))
                for ci, m in enumerate(doc.get("candidates") or []):
                    row = one(m, f"{loc} candidates[{ci}]", [], {"candidate": True})
                    if row is not None and dedup.first(row["mention_id"]):
                        bump(stats, "test_candidates")
                        yield "mentions", row
    bump(stats, "duplicate_mentions", dedup.duplicates)
    for t in sorted(set(types) | set(defs)):
        yield "event_types", {"dataset": dataset, "type_id": t, "name": t.replace("_", " "), "definition": defs.get(t),
                              "parent_id": None, "ontology": ONTOLOGY, "extra": dumps({"type_id": types.get(t)} if types.get(t) is not None else None)}
