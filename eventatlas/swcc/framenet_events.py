"""(subject, verb, object) events from FrameNet's own annotation, with no parser: the grammatical-function
layer (``GF``) of every frame annotation set of the lexical-unit exemplars (``lu/*.xml``, e.g. the FrameNet
1.5 verb release) and of full text (``fulltext/*.xml``), into the tables the ``event_tuples`` reader
writes (documents, events as mentions, ``cooccurrence`` event pairs), so SWCC trains on them.

Per annotation set (a frame, a ``Target`` layer and a ``GF`` layer):

* verb = the target's words (discontinuous pieces joined by a space), lower-cased and not lemmatised,
  as in Weber et al.'s NYT tuples;
* subject = the head of the ``Ext`` span; object = the head of the first ``Obj`` span, else of the
  first ``Dep`` span whose phrase type (``PT`` layer) is a prepositional phrase (``PP`` / ``PP[...]``: the
  preposition dropped, the tuples' prepositional slot). A span counts only when its phrase type is
  nominal (``NP``, ``N``, ``Poss``; ``PP[...]`` for the ``Dep`` object), so clauses and adverbs do not
  fill a slot (counted ``slot_not_nominal``);
* head rule (:func:`head_word`): the span's whitespace tokens are cut at the first preposition,
  relative word or punctuation mark after its first token (``the bloody snow on the hill`` ->
  ``the bloody snow``), trailing possessive markers are dropped, and the last remaining token is the
  head, lower-cased; a span without a token holding a letter has no head (``no_head``);
* an event needs a subject or an object; otherwise the annotation set is a counted reject
  (``no_subject_or_object``, also when the ``GF`` layer is empty). A frame annotation set without a
  ``GF`` layer is a counted reject (``no_gf_layer``). Null-instantiated FEs (no offsets) fill no slot.

Documents (the co-occurrence unit; exemplars are single, unrelated sentences): the events of one frame,
taken round-robin over its lexical units (LU files in name order, exemplars in file order) and cut into
chunks of ``chunk`` events; one chunk is one document ``<frame>#<k>``. So the weak co-occurrence
pairs SWCC draws are *same-frame* pairs, mostly of different lexical units, and SWCC's dropout views
stay the strong positives. With ``min-max`` pair weighting almost every such pair (count 1) weighs 0:
the data then adds distinct events above all (see docs/methods/swcc.md).

The open-sesame JSONL of FrameNet 1.7 full text keeps only frame-element spans (no ``GF`` or ``PT``
layer), so it gives no events here.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Iterator

from ..io import Rejects

__all__ = ["CUT_WORDS", "head_word", "gf_event", "framenet_events", "write_framenet_events"]

# words that end the head region of an argument span: prepositions, relative / complementiser words
CUT_WORDS = frozenset("""about above across after against along amid among around as at before behind below beneath
beside besides between beyond by despite down during except for from in inside into like near of off on onto out
outside over past per since than through throughout till to toward towards under underneath until up upon via with
within without who whom whose which that where when while because if whether""".split())
_PUNCT = re.compile(r"^[^\w]+$")
_LETTER = re.compile(r"[^\W\d_]")
NOMINAL_PT = ("NP", "N", "Poss")
_POSSESSIVE = ("'s", "'", "’s")


def head_word(span: str, *, drop_preposition: bool = False) -> str | None:
    """The head of an argument span by the module's rule; ``drop_preposition``: the span is a PP (its
    first token, the preposition, is not a candidate)."""
    toks = span.split()
    if drop_preposition and toks:
        toks = toks[1:]
    for i, t in enumerate(toks):
        if i > 0 and (t.lower() in CUT_WORDS or _PUNCT.match(t)):
            toks = toks[:i]
            break
    while toks and (toks[-1].lower() in _POSSESSIVE or _PUNCT.match(toks[-1])):
        toks = toks[:-1]
    if not toks or not _LETTER.search(toks[-1]):
        return None
    return toks[-1].lower()


def _labels(aset, name: str) -> list[tuple[str, int | None, int | None]]:
    from ..readers._xml import children

    out = []
    for layer in children(aset, "layer"):
        if layer.get("name") == name and layer.get("rank", "1") == "1":
            for lab in children(layer, "label"):
                s, e = lab.get("start"), lab.get("end")
                out.append((lab.get("name"), int(s) if s is not None else None, int(e) + 1 if e is not None else None))
    return out


def gf_event(text: str, aset, stats: Counter) -> tuple[tuple[str | None, str, str | None] | None, str | None]:
    """``((subj, verb, obj), None)`` for one frame annotation set, or ``(None, reject reason)``."""
    target = sorted((s, e) for _, s, e in _labels(aset, "Target") if s is not None)
    if not target:
        return None, "no_target"
    from ..readers._xml import children

    if not any(layer.get("name") == "GF" for layer in children(aset, "layer")):
        return None, "no_gf_layer"
    gf = _labels(aset, "GF")
    pt = {(s, e): name for name, s, e in _labels(aset, "PT") if s is not None}
    verb = " ".join(text[s:e] for s, e in target).lower()

    def slot(functions: tuple[str, ...], pp: bool) -> str | None:
        for name, s, e in gf:
            if name not in functions:
                continue
            if s is None:
                stats["null_instantiated"] += 1
                continue
            phrase = pt.get((s, e), "")
            ok = (phrase == "PP" or phrase.startswith("PP[")) if pp else phrase in NOMINAL_PT
            if not ok:
                stats["slot_not_nominal"] += 1
                continue
            h = head_word(text[s:e], drop_preposition=pp)
            if h is None:
                stats["no_head"] += 1
                continue
            return h
        return None

    subj = slot(("Ext",), False)
    obj = slot(("Obj",), False) or slot(("Dep",), True)
    if subj is None and obj is None:
        return None, "no_subject_or_object"
    return (subj, verb, obj), None


def _annotation_sets(path: Path, rejects: Rejects, stats: Counter) -> Iterator[tuple[str, str, str, tuple]]:
    """(frame, LU, source sentence, event) for every frame annotation set of the release at ``path``,
    LU files in name order, then full-text files."""
    from ..readers._xml import local, parse_bytes
    from ..readers.framenet import _annotated_sentences, _Source

    src = _Source(Path(path))
    try:
        files = [(n, g, True) for n, g in src.files("lu")] + [(n, g, False) for n, g in src.files("fulltext")]
        if not files:
            raise ValueError(f"{path}: no lu/*.xml or fulltext/*.xml annotation files (a FrameNet release "
                             "directory or zip with annotations is needed)")
        for name, get, is_lu in files:
            root = parse_bytes(get(), name)
            if is_lu and local(root.tag) != "lexUnit":
                rejects.add(name, "root", "not_a_lexunit", f"root element {local(root.tag)!r}")
                continue
            frame0, lu0 = (root.get("frame"), root.get("name")) if is_lu else (None, None)
            stats["files"] += 1
            for sent, text, aset, frame, lu in _annotated_sentences(root, frame0, lu0):
                loc = f"sentence {sent.get('ID')} annotationSet {aset.get('ID')}"
                stats["annotation_sets"] += 1
                if text is None:
                    rejects.add(name, loc, "missing_field", "sentence has no <text>")
                    continue
                try:
                    ev, why = gf_event(text, aset, stats)
                except ValueError as e:  # a non-integer offset
                    ev, why = None, "bad_offset"
                    rejects.add(name, loc, why, str(e))
                    continue
                if ev is None:
                    rejects.add(name, loc, why, f"{frame} / {lu}", text)
                    continue
                yield frame, lu or "", text, ev
    finally:
        src.close()


def framenet_events(path, *, dataset: str = "framenet_svo", chunk: int = 32, rejects: Rejects,
                    stats: dict | None = None) -> Iterator[tuple[str, dict]]:
    """``(table, row)`` pairs as the ``event_tuples`` reader yields them (module doc); ``stats`` gets the
    counts (annotation sets, events, documents, co-occurring pairs, and the dropped slots by reason)."""
    from ..readers.event_tuples import cooccurrence_rows, count_pairs, document_row, mention_row

    if chunk < 2:
        raise ValueError(f"chunk must be >= 2 (a document of one event has no co-occurring pair), got {chunk}")
    st: Counter = Counter()
    by_frame: dict[str, dict[str, list]] = {}
    for frame, lu, text, ev in _annotation_sets(Path(path), rejects, st):
        by_frame.setdefault(frame, {}).setdefault(lu, []).append((ev, text))
    counts: Counter = Counter()
    for frame in sorted(by_frame):
        lus = [by_frame[frame][k] for k in sorted(by_frame[frame])]
        # round-robin over the frame's LUs, so one chunk mixes lexical units
        mixed = [lst[i] for i in range(max(len(x) for x in lus)) for lst in lus if i < len(lst)]
        for k in range(0, len(mixed), chunk):
            part = mixed[k:k + chunk]
            doc = f"{frame}#{k // chunk}"
            yield "documents", document_row(dataset, doc, None, {"frame": frame, "n_events": len(part)})
            for pos, (ev, text) in enumerate(part):
                yield "mentions", mention_row(dataset, doc, pos, ev, None, source_sentence=text)
            count_pairs(counts, [e for e, _ in part])
            st["documents"] += 1
            st["events"] += len(part)
    yield from cooccurrence_rows(dataset, counts)
    st["cooccurring_pairs"] = len(counts)
    st["frames"] = len(by_frame)
    if stats is not None:
        stats.update(st)


def write_framenet_events(path, out_dir, *, dataset: str = "framenet_svo", chunk: int = 32) -> dict:
    """Extract and write the dataset (all tables or none; manifest last, with ``stats`` and the rejects
    counted by reason). Returns the manifest."""
    from ..io import DatasetWriter

    rejects = Rejects(dataset)
    st: dict = {}
    with DatasetWriter(out_dir, dataset, tables=["documents", "mentions", "event_pairs", "rejects"]) as w:
        for table, row in framenet_events(path, dataset=dataset, chunk=chunk, rejects=rejects, stats=st):
            w.write(table, row)
        for r in rejects.rows:
            w.write("rejects", r)
        return w.commit({"reader": "framenet_gf", "source": str(path), "parser": None, "stats": st,
                         "rejects": rejects.counts(), "chunk": chunk, "language": "en"})
