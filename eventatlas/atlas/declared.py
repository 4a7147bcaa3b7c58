"""Declared links: what an inventory or a hand table states, kept apart from learned scores.

* a dataset's ``type_relations`` (FrameNet Inheritance / Subframe / Using / ..., OntoEvent's
  SUBSUPER / COSUPER / CAUSE ..., a wiki build's Wikidata subclass_of (P279) / part_of (P361) ...),
  each under its own relation name;
* the hand mappings ``datasets/mappings/*.tsv`` (ACE, MAVEN, OntoEvent -> FrameNet) as ``maps_to``
  to the frame in every FrameNet inventory of the atlas that has it.

Declared links have ``kind = 'declared'`` and no score: a declared relation is a fact with a
provenance, not a similarity, and no learned scorer reads them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from .inventory import Inventory, node_id
from .links import LINKS, link_row

MAPS_TO = "maps_to"


def declared_links(inv: Inventory, framenets: Iterable[Inventory] = ()) -> pa.Table:
    rows = []
    rel = inv.dataset_dir / "type_relations.parquet"
    if inv.kind == "type" and rel.exists():
        t = pq.read_table(rel, columns=["source_id", "target_id", "relation"])
        for s, o, r in zip(*(t.column(c).to_pylist() for c in ("source_id", "target_id", "relation"))):
            rows.append(link_row(node_id(inv.key, s), node_id(inv.key, o), r, kind="declared", method="declared",
                                 provenance=f"{inv.dataset}/type_relations"))
    from .gold import gold_for, mapping_path

    mp = mapping_path(inv.ontology)
    if inv.kind == "type" and mp is not None and mp.exists():
        from ..evaluation.naming import read_mapping

        gold = gold_for(inv.types, read_mapping(mp))
        for fn in framenets:
            have = set(fn.types)
            for i, frames in sorted(gold.items()):
                for f in sorted(frames & have):
                    rows.append(link_row(node_id(inv.key, inv.types[i]), node_id(fn.key, f), MAPS_TO, kind="declared",
                                         method="hand mapping", provenance=f"datasets/mappings/{Path(mp).name}"))
    return pa.Table.from_pylist(rows, schema=LINKS)
