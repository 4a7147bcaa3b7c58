"""FrameNet as a hierarchical event-grounding benchmark, in the schema the wiki builder writes.

Input: a directory holding ``framenet17/`` (``frame.zip`` or ``frame/*.xml``, ``frRelation.xml``,
``fulltext_opensesame_*.jsonl``) and ``framenet15/`` (``fndata-1.5-verbs.zip`` or a release directory
with ``lu/*.xml``), i.e. the shared data root. Options ``fn17=`` / ``fn15=`` point elsewhere;
``max_height`` (levels, default 3, as :mod:`eventatlas.wiki.hierarchy`), ``seed`` (split shuffle, 0).

* Candidates (``event_types``): every FN1.7 frame with its definition (the candidate pool).
* Hierarchy: child part-of parent where the child is a Subframe of the parent (the P361/P527 analogue),
  cut to trees of at most ``max_height`` levels by :func:`eventatlas.wiki.hierarchy.build_hierarchy`
  (one parent per frame, cycles and too-deep edges dropped with a reject); ``parent_id`` holds it.
* Dictionary: frames in a tree with at least one edge (height >= 1 counted in edges); a frame outside it
  is a candidate only (``extra.in_dictionary`` false, ``extra.split`` null).
* Mentions: FN1.7 full-text annotations (open-sesame JSONL) and FN1.5 exemplars (LU files) whose frame is in
  the dictionary; ``labels`` = the frame, then its ancestors (:func:`eventatlas.wiki.hierarchy.label_set`);
  ``extra`` = ``qid`` (the atomic frame, as the wiki builder writes it), ``source`` (fulltext | exemplar),
  ``source_split`` (the file's split), ``lu``. Every other annotation is a reject with its reason.
* Zero-shot splits: connected components over Subframe ∪ Precedes (the P361/P527/P155/P156 analogue) among all
  frames; the components holding a dictionary frame are shuffled with ``seed`` and cut 80/10/10 by count
  (:func:`eventatlas.wiki.splits.assign_splits`): no frame, hence no mention's atomic event, in two splits.
  A mention's ``split`` is its frame's.
* ``type_relations``: ``part_of`` (child -> parent of the cut hierarchy) and ``follows`` (Precedes: later ->
  earlier), as the wiki builder's ``part_of`` / ``follows``.
* Table-1 statistics (mentions, events, trees, average children, max depth per split;
  :func:`eventatlas.wiki.build.table1`) land in the manifest as ``stats.table1``.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from . import framenet, framenet_jsonl
from ._common import unique_ids

DEFAULT_DATASET = "framenet_grounding"
EXPECTED_TABLES = ("mentions", "event_types")
ONTOLOGY = "FrameNet"


@dataclass
class _Frame:
    """The attributes :mod:`eventatlas.wiki.hierarchy` and :mod:`eventatlas.wiki.splits` read of an event."""

    qid: str
    part_of: list[str] = field(default_factory=list)
    has_part: list[str] = field(default_factory=list)
    follows: list[str] = field(default_factory=list)
    followed_by: list[str] = field(default_factory=list)


def _locate(path: Path, fn17, fn15) -> tuple[Path, Path]:
    fn17 = Path(fn17) if fn17 else path / "framenet17"
    if fn15:
        fn15 = Path(fn15)
    else:
        d = path / "framenet15"
        zips = sorted(d.glob("*.zip")) if d.is_dir() else []
        fn15 = zips[0] if zips else d
    for p, what in ((fn17, "FrameNet 1.7 directory (framenet17/)"), (fn15, "FrameNet 1.5 verbs zip or directory (framenet15/)")):
        if not p.exists():
            raise InputError(p, "-", f"{what} not found; pass the directory holding framenet17/ and framenet15/ (or fn17=/fn15=)")
    return fn17, fn15


def input_paths(path, *, fn17=None, fn15=None, **_) -> list[Path]:
    """The files this reader reads (what the ingest fingerprints), not the whole directory."""
    a, b = _locate(Path(path), fn17, fn15)
    return [a, b]


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None, fn17=None, fn15=None,
         max_height: int = 3, seed: int = 0, **opts) -> Iterator[tuple[str, dict]]:
    from ..wiki import hierarchy as H
    from ..wiki.build import table1
    from ..wiki.splits import assign_splits, components

    stats = stats if stats is not None else {}
    fn17, fn15 = _locate(Path(path), fn17, fn15)
    frames: dict[str, dict] = {}
    rels: list[tuple[str, str, str]] = []
    for table, row in unique_ids(framenet.read(fn17, dataset=dataset, rejects=rejects, annotations=False), rejects, fn17):
        if table == "event_types":
            frames[row["type_id"]] = row
        elif table == "type_relations":
            rels.append((row["source_id"], row["target_id"], row["relation"]))
    if not frames:
        raise InputError(fn17, "-", "no frames found (frame.zip or frame/*.xml)")
    nodes = {f: _Frame(f) for f in frames}
    for sub, sup, r in rels:
        if sub not in nodes or sup not in nodes or sub == sup:
            continue  # unknown_frame already rejected by the FrameNet reader
        if r == "Subframe":
            nodes[sub].part_of.append(sup)
        elif r == "Precedes":  # source = later, target = earlier
            nodes[sub].follows.append(sup)
    parent = H.build_hierarchy(nodes.values(), rejects, max_height=int(max_height), source="frRelation.xml")
    in_tree = set(parent) | set(parent.values())
    comps = components(nodes.values())
    comp_of = {q: i for i, c in enumerate(comps) for q in c}
    dict_comps = [c for c in comps if any(q in in_tree for q in c)]
    split_of = assign_splits(dict_comps, int(seed))

    mentions: list[dict] = []
    docs: dict[str, dict] = {}
    n_in: Counter = Counter()

    def take(source: str, rows: Iterator[tuple[str, dict]], fn17_frames: bool) -> None:
        for table, row in rows:
            if table == "documents":
                docs.setdefault(row["doc_id"], row)
                continue
            if table != "mentions":
                continue
            n_in[source] += 1
            frame = row["labels"][0]
            where = f"{row['doc_id']} [{row['trigger_start']}:{row['trigger_end']}]"
            if frame not in frames:
                rejects.add(source, where, "frame_not_in_fn17", f"frame {frame!r} is not a FrameNet 1.7 frame", row["sentence"])
                continue
            if frame not in in_tree:
                rejects.add(source, where, "frame_not_in_dictionary", f"frame {frame!r} is in no Subframe tree", None)
                continue
            extra = json.loads(row["extra"]) if row.get("extra") else {}
            mentions.append({**row, "dataset": dataset, "labels": H.label_set(frame, parent), "split": split_of[frame],
                             "extra": json.dumps({"qid": frame, "source": source, "source_split": row.get("split"),
                                                  "lu": extra.get("lu"), "atomic_split": split_of[frame]}, sort_keys=True)})

    take("fulltext", framenet_jsonl.read(fn17, dataset=dataset, rejects=rejects, stats=stats), True)
    fn15_rows = framenet.read(fn15, dataset=dataset, rejects=Rejects(dataset), annotations=True)  # FN1.5 frames: unused
    take("exemplar", ((t, r) for t, r in fn15_rows if t in ("mentions", "documents")), False)

    n_mentions = Counter(json.loads(m["extra"])["qid"] for m in mentions)
    anc = {q: H.ancestors(q, parent) for q in frames}
    for name in sorted(frames):
        f = frames[name]
        extra = json.loads(f["extra"]) if f.get("extra") else {}
        extra = {"ID": extra.get("ID"), "split": split_of.get(name), "component": comp_of[name], "in_dictionary": name in in_tree,
                 "n_mentions": n_mentions.get(name, 0), "grounded": name in n_mentions, "ancestors": anc[name]}
        yield "event_types", {**f, "dataset": dataset, "parent_id": parent.get(name), "ontology": ONTOLOGY,
                              "extra": json.dumps(extra, sort_keys=True)}
    out_rels = {(c, p, "part_of") for c, p in parent.items()}
    out_rels |= {(n.qid, o, "follows") for n in nodes.values() for o in n.follows}
    for s, t, r in sorted(out_rels):
        yield "type_relations", {"dataset": dataset, "source_id": s, "target_id": t, "relation": r,
                                 "source_ontology": ONTOLOGY, "target_ontology": ONTOLOGY}
    mentions.sort(key=lambda m: m["mention_id"])
    used_docs = {m["doc_id"] for m in mentions}
    for d in sorted(used_docs):
        if d in docs:
            yield "documents", {**docs[d], "dataset": dataset, "split": None}
    for m in mentions:
        yield "mentions", m
    stats["mentions_read"] = dict(n_in)
    stats["dictionary_frames"] = len(in_tree)
    stats["candidate_frames"] = len(frames)
    stats["components_with_dictionary_frames"] = len(dict_comps)
    stats["table1"] = [r for r in table1(mentions, [], parent, split_of) if r["split"] != "wikinews" and r["language"] == "all"]
