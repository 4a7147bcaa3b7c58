"""FrameNet 1.7 release (directory, or a zip of it): frames, frame relations, annotations.

Layout read: ``frame/*.xml`` or ``frame.zip`` (frames: definition, FEs, LUs, semtypes),
``frRelation.xml`` (frame-to-frame relations), ``luIndex.xml`` (counted; LU names per frame
when no frame files carry them), optional ``fulltext/*.xml`` and ``lu/*.xml`` (annotated
sentences -> mentions). All XML is namespaced (``http://framenet.icsi.berkeley.edu``) and
parsed with defusedxml.

event_types: one per frame; ``type_id`` = frame name; ``definition`` = the frame definition
with its markup removed and the ``<ex>`` examples cut off (they go to ``extra.examples``);
``parent_id`` = the first Inheritance parent in frRelation.xml order; ``extra`` = FEs (name,
coreType, definition), LUs (name, POS, status), semtypes, FrameNet ID.

type_relations direction convention: ``source_id`` = the frame in the relation's *sub* role,
``target_id`` = the frame in its *super* role, ``relation`` = FrameNet's relation name. So for
Inheritance source = child, target = parent; Subframe source = component, target = complex
frame; Using source = the frame that uses, target = the used frame; Precedes source = later,
target = earlier; Causative_of source = inchoative/state, target = causative. Without
frRelation.xml the frame files' own "Inherits from" / "Subframe of" / "Uses" lists are used.

Mentions: every annotationSet with a frame and a Target layer; FrameNet label ``end`` is
inclusive, so trigger = ``text[start:end+1]``; discontinuous targets use the covering span
(all pieces in ``extra.target_spans``); FE labels become arguments (null-instantiated FEs,
without offsets, are kept with null offsets and ``entity_id`` = the itype, e.g. "INI").
"""
from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects, stable_id
from ._common import MentionDedup, bump, check_span, dumps, mention_row, read_bytes, record_guard
from ._xml import child, children, local, parse_bytes
from ._zip import SafeZip, looks_like_zip

DEFAULT_DATASET = "framenet"
ONTOLOGY = "FrameNet"
EXPECTED_TABLES = ("event_types", "mentions")  # frames alone (annotations=False) are a valid ingest
_TAG = re.compile(r"<[^>]+>")
_EX = re.compile(r"<ex>(.*?)</ex>", re.S)
_WS = re.compile(r"\s+")
_FALLBACK_REL = {"Inherits from": "Inheritance", "Subframe of": "Subframe", "Uses": "Using"}


def clean_markup(s: str | None) -> str:
    """FrameNet definitions hold escaped markup (<def-root>, <fex>, <t>, <ex>); drop the tags."""
    if not s:
        return ""
    return _WS.sub(" ", html.unescape(_TAG.sub("", s))).strip()


def split_definition(raw: str | None) -> tuple[str, list[str]]:
    raw = raw or ""
    examples = [clean_markup(x) for x in _EX.findall(raw)]
    return clean_markup(_EX.sub(" ", raw)), [e for e in examples if e]


class _Source:
    """Uniform access to a release as a directory, a directory with frame.zip, or one zip.

    Zips go through :class:`~eventatlas.readers._zip.SafeZip`: members with ``..`` or an absolute
    path are refused, members are inflated in chunks under a size / expansion-ratio cap
    (``zip_max_bytes`` / ``zip_max_ratio`` reader options or their env vars) and a damaged archive
    is named as such."""

    def __init__(self, path: Path, *, zip_max_bytes: int | None = None, zip_max_ratio: float | None = None):
        self.path = path
        self.zips: list[SafeZip] = []
        caps = {"max_bytes": zip_max_bytes, "max_ratio": zip_max_ratio}
        try:
            if path.is_file() and looks_like_zip(path):
                self.zips.append(SafeZip(path, **caps))
            elif path.is_dir():
                for z in sorted(path.glob("*.zip")):
                    self.zips.append(SafeZip(z, **caps))
            else:
                raise InputError(path, "-", "expected a FrameNet release directory or zip")
        except BaseException:
            self.close()
            raise

    def files(self, folder: str) -> list[tuple[str, callable]]:
        """(display name, reader) for ``folder/*.xml`` in the directory and in any zip."""
        out = {}
        if self.path.is_dir() and (self.path / folder).is_dir():
            for p in sorted((self.path / folder).glob("*.xml")):
                out[p.name] = (str(p), (lambda p=p: read_bytes(p)))
        for z in self.zips:
            for n in sorted(z.namelist()):
                parts = n.split("/")
                if n.endswith(".xml") and len(parts) >= 2 and parts[-2] == folder and parts[-1] not in out:
                    out[parts[-1]] = (f"{z.filename}:{n}", (lambda z=z, n=n: z.read(n)))
        return [out[k] for k in sorted(out)]

    def single(self, name: str):
        if self.path.is_dir() and (self.path / name).exists():
            p = self.path / name
            return str(p), (lambda: read_bytes(p))
        for z in self.zips:
            for n in z.namelist():
                if n.split("/")[-1] == name and n.count("/") <= 1:
                    return f"{z.filename}:{n}", (lambda z=z, n=n: z.read(n))
        return None

    def close(self):
        for z in self.zips:
            z.close()


def _relations(src: _Source, rejects: Rejects):
    found = src.single("frRelation.xml")
    if not found:
        return None
    name, get = found
    root = parse_bytes(get(), name)
    rels = []
    for rt in children(root, "frameRelationType"):
        rname = rt.get("name")
        for i, fr in enumerate(children(rt, "frameRelation")):
            sub, sup = fr.get("subFrameName"), fr.get("superFrameName")
            if not sub or not sup or not rname:
                rejects.add(name, f"{rname}[{i}]", "missing_field", "frameRelation lacks subFrameName/superFrameName", dict(fr.attrib))
                continue
            rels.append((sub, sup, rname))
    return rels


def _frame(root, name: str) -> dict:
    definition, examples = split_definition((child(root, "definition").text if child(root, "definition") is not None else ""))
    fes = [{"name": fe.get("name"), "coreType": fe.get("coreType"), "ID": fe.get("ID"),
            "definition": clean_markup(child(fe, "definition").text if child(fe, "definition") is not None else "")}
           for fe in children(root, "FE")]
    lus = [{"name": lu.get("name"), "POS": lu.get("POS"), "status": lu.get("status"), "ID": lu.get("ID")} for lu in children(root, "lexUnit")]
    sem = [s.get("name") for s in children(root, "semType")]
    rel = {}
    for fr in children(root, "frameRelation"):
        rel[fr.get("type")] = [r.text for r in children(fr, "relatedFrame") if r.text]
    return {"name": root.get("name"), "ID": root.get("ID"), "definition": definition, "examples": examples,
            "FEs": fes, "LUs": lus, "semtypes": sem, "relations": rel, "source": name}


def _annotated_sentences(root, default_frame=None, default_lu=None):
    """Yield (sentence element, text, annotationSet, frame, lu) for every frame annotation set."""
    for sent in root.iter():
        if local(sent.tag) != "sentence":
            continue
        t = child(sent, "text")
        text = t.text if t is not None and t.text is not None else None
        for aset in children(sent, "annotationSet"):
            frame = aset.get("frameName") or default_frame
            if frame is None:
                continue  # POS / syntax layers of the sentence, not a frame annotation
            if aset.get("frameName") is None and not any(l.get("name") == "Target" for l in children(aset, "layer")):
                continue
            yield sent, text, aset, frame, aset.get("luName") or default_lu


def _mentions_from(root, fname, dataset, rejects, dedup, split, doc_id, stats, default_frame=None, default_lu=None, lu_pos=None):
    for sent, text, aset, frame, lu in _annotated_sentences(root, default_frame, default_lu):
        loc = f"sentence {sent.get('ID')} annotationSet {aset.get('ID')}"
        with record_guard(rejects, fname, loc, None):  # e.g. start="x": a reject naming file and annotation set
            if text is None:
                rejects.add(fname, loc, "missing_field", "sentence has no <text>", None)
                continue
            tspans, args = [], []
            for layer in children(aset, "layer"):
                if layer.get("name") == "Target":
                    for lab in children(layer, "label"):
                        if lab.get("start") is not None and lab.get("end") is not None:
                            tspans.append((int(lab.get("start")), int(lab.get("end")) + 1))  # FrameNet end is inclusive
                elif layer.get("name") == "FE" and layer.get("rank", "1") == "1":
                    for lab in children(layer, "label"):
                        if lab.get("start") is not None and lab.get("end") is not None:
                            s, e = int(lab.get("start")), int(lab.get("end")) + 1
                            args.append({"role": lab.get("name"), "text": text[s:e], "start": s, "end": e, "entity_id": None})
                        else:
                            args.append({"role": lab.get("name"), "text": None, "start": None, "end": None, "entity_id": lab.get("itype")})
            if not tspans:
                bump(stats, "annotation_sets_without_target")
                continue
            tspans.sort()
            s, e = tspans[0][0], tspans[-1][1]
            if not check_span(rejects, fname, loc, text, s, e, text[s:e] if 0 <= s < e <= len(text) else None, {"spans": tspans}):
                continue
            sid = sent.get("ID")
            row = mention_row(dataset, doc_id or f"sent{sid}", int(sid) if sid and sid.isdigit() else None, text, s, e, [frame], split=split,
                              arguments=args, extra={"lu": lu, "pos": (lu.rsplit(".", 1)[-1] if lu and "." in lu else lu_pos),
                                                     "target_spans": tspans if len(tspans) > 1 else None,
                                                     "annotation_set": aset.get("ID"), "status": aset.get("status")})
            if dedup.first(row["mention_id"]):
                yield row


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None, annotations: bool = True,
         zip_max_bytes: int | None = None, zip_max_ratio: float | None = None, **opts) -> Iterator[tuple[str, dict]]:
    src = _Source(Path(path), zip_max_bytes=None if zip_max_bytes is None else int(zip_max_bytes),
                  zip_max_ratio=None if zip_max_ratio is None else float(zip_max_ratio))
    try:
        rels = _relations(src, rejects)
        frames = []
        for name, get in src.files("frame"):
            root = parse_bytes(get(), name)
            if local(root.tag) != "frame" or not root.get("name"):
                rejects.add(name, "root", "not_a_frame", f"root element {local(root.tag)!r} without a frame name", None)
                continue
            frames.append(_frame(root, name))
        frame_names = {f["name"] for f in frames}
        lu_index = src.single("luIndex.xml")
        lus_by_frame: dict[str, list] = {}
        if lu_index:
            n, get = lu_index
            for lu in parse_bytes(get(), n).iter():
                if local(lu.tag) == "lu":
                    lus_by_frame.setdefault(lu.get("frameName"), []).append({"name": lu.get("name"), "status": lu.get("status"), "ID": lu.get("ID")})
            bump(stats, "lu_index_entries", sum(len(v) for v in lus_by_frame.values()))
        if not frames and not rels:
            raise InputError(path, "-", "no frame/*.xml (or frame.zip) and no frRelation.xml found")
        if rels is None:  # fall back to the frames' own relation lists (sub role = this frame)
            rels = [(f["name"], other, rname) for f in frames for ftype, rname in _FALLBACK_REL.items() for other in f["relations"].get(ftype, [])]
        parent: dict[str, str] = {}
        for sub, sup, rname in rels:
            if rname == "Inheritance":
                parent.setdefault(sub, sup)
            yield "type_relations", {"dataset": dataset, "source_id": sub, "target_id": sup, "relation": rname,
                                     "source_ontology": ONTOLOGY, "target_ontology": ONTOLOGY}
            for fr in (sub, sup):
                if frame_names and fr not in frame_names:
                    rejects.add("frRelation.xml", f"{rname} {sub}->{sup}", "unknown_frame", f"frame {fr!r} has no frame file", None)
        for f in frames:
            extra = {"ID": f["ID"], "FEs": f["FEs"], "LUs": f["LUs"] or lus_by_frame.get(f["name"], []), "semtypes": f["semtypes"], "examples": f["examples"]}
            yield "event_types", {"dataset": dataset, "type_id": f["name"], "name": f["name"].replace("_", " "), "definition": f["definition"],
                                  "parent_id": parent.get(f["name"]), "ontology": ONTOLOGY, "extra": dumps(extra),
                                  "_source": f["source"]}  # names the file when a second file repeats the frame
        if not frames:  # relations only: still give every related frame a row so parent ids resolve
            for fr in sorted({x for r in rels for x in r[:2]} | set(lus_by_frame) - {None}):
                yield "event_types", {"dataset": dataset, "type_id": fr, "name": fr.replace("_", " "), "definition": None,
                                      "parent_id": parent.get(fr), "ontology": ONTOLOGY, "extra": dumps({"LUs": lus_by_frame.get(fr, [])})}
        if not annotations:
            return
        dedup = MentionDedup()
        for name, get in src.files("fulltext"):
            root = parse_bytes(get(), name)
            doc = next((d for d in root.iter() if local(d.tag) == "document"), None)
            doc_id = f"fulltext:{doc.get('ID') if doc is not None else Path(name).stem}"
            texts = [child(s, "text").text or "" for s in root.iter() if local(s.tag) == "sentence" and child(s, "text") is not None]
            yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": doc.get("description") if doc is not None else None,
                                "language": "en", "sentences": texts, "source": Path(name.split(":")[-1]).name, "split": "fulltext",
                                "extra": dumps({"name": doc.get("name") if doc is not None else None})}
            for row in _mentions_from(root, name, dataset, rejects, dedup, "fulltext", doc_id, stats):
                yield "mentions", row
        for name, get in src.files("lu"):
            root = parse_bytes(get(), name)
            if local(root.tag) != "lexUnit":
                rejects.add(name, "root", "not_a_lexunit", f"root element {local(root.tag)!r}", None)
                continue
            doc_id = f"lu:{root.get('ID')}"
            yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": root.get("name"), "language": "en",
                                "source": Path(name.split(":")[-1]).name, "split": "exemplar",
                                "extra": dumps({"frame": root.get("frame"), "POS": root.get("POS")})}
            for row in _mentions_from(root, name, dataset, rejects, dedup, "exemplar", doc_id, stats,
                                      default_frame=root.get("frame"), default_lu=root.get("name"), lu_pos=root.get("POS")):
                yield "mentions", row
        bump(stats, "duplicate_mentions", dedup.duplicates)
    finally:
        src.close()


def sentence_doc_id(text: str) -> str:
    """Document id for sources without one (the open-sesame JSONL): a hash of the sentence text."""
    return "s" + stable_id(text, length=8)
