"""FrameNet full-text annotations as open-sesame JSONL (``fulltext_opensesame_{train,dev}.jsonl``):
one annotation a line ``{text, tokens, target:[start, end), lu, frame, fe:[[name, start, end], ...]}``,
char offsets into ``text``, end-exclusive.

labels = [frame]; extra = lu ("cover.v") and pos ("v"); FEs become arguments; split from the
file name (train / dev / test). There is no document id: ``doc_id`` is a hash of the sentence
text, so annotations of one sentence share it (``sent_idx`` 0). Identical annotations (same
sentence, target and frame) are deduplicated.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import bump, check_span, jsonl_items, mention_row, MentionDedup, record_guard, records
from .framenet import sentence_doc_id

DEFAULT_DATASET = "framenet_fulltext"


def _split(p: Path) -> str:
    stem = p.stem.lower()
    return next((s for s in ("train", "dev", "test") if stem.endswith(s) or f"_{s}" in stem), "all")


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise InputError(path, "-", "no *.jsonl files in directory")
    dedup = MentionDedup()
    docs: set[str] = set()
    for f in files:
        split = _split(f)
        for loc, obj in records(rejects, f, jsonl_items(f), "annotation", ("text", "target", "frame")):
            with record_guard(rejects, f, loc, obj):
                text, tgt = obj["text"], obj["target"]
                if not (isinstance(tgt, list) and len(tgt) == 2 and all(isinstance(x, int) for x in tgt)):
                    rejects.add(f, loc, "bad_offsets", f"target {tgt!r} is not [start, end)", obj)
                    continue
                s, e = tgt
                # the source gives no trigger string: the check is that the span is inside the text and
                # on token boundaries when tokens are given (a shifted span would cut a token)
                trig = text[s:e] if 0 <= s < e <= len(text) else None
                if trig is not None and obj.get("tokens") and not _on_token_boundaries(text, s, e):
                    rejects.add(f, loc, "offset_mismatch", f"target [{s}, {e}) = {trig!r} does not fall on token boundaries", obj)
                    continue
                if not check_span(rejects, f, loc, text, s, e, trig, obj):
                    continue
                args = []
                for fe in obj.get("fe") or []:
                    if isinstance(fe, list) and len(fe) == 3 and isinstance(fe[1], int) and isinstance(fe[2], int) and 0 <= fe[1] <= fe[2] <= len(text):
                        args.append({"role": fe[0], "text": text[fe[1] : fe[2]], "start": fe[1], "end": fe[2], "entity_id": None})
                    else:
                        rejects.add(f, loc, "bad_argument", f"frame element {fe!r} is not [name, start, end) inside the text", fe)
                lu = obj.get("lu")
                doc_id = sentence_doc_id(text)
                row = mention_row(dataset, doc_id, 0, text, s, e, [obj["frame"]], split=split, arguments=args,
                                  extra={"lu": lu, "pos": lu.rsplit(".", 1)[-1] if isinstance(lu, str) and "." in lu else None})
                if not dedup.first(row["mention_id"]):
                    continue
                if doc_id not in docs:
                    docs.add(doc_id)
                    yield "documents", {"dataset": dataset, "doc_id": doc_id, "language": "en", "sentences": [text], "source": f.name, "split": split}
                yield "mentions", row
    bump(stats, "duplicate_mentions", dedup.duplicates)


def _on_token_boundaries(text: str, s: int, e: int) -> bool:
    left_ok = s == 0 or not (text[s - 1].isalnum() and text[s].isalnum())
    right_ok = e == len(text) or not (text[e - 1].isalnum() and text[e].isalnum())
    return left_ok and right_ok
