"""Writing the atlas out: CSV, JSON lines, or SKOS in RDF Turtle.

``csv`` / ``jsonl``: ``atlas_nodes.<ext>`` and ``atlas_links.<ext>`` (list columns as ``|``-joined text in
CSV, arrays in JSON; a CSV text cell that starts like a formula, ``=``, ``+``, ``-``, ``@``, gets a leading
``'``). ``html``: ``atlas.html``, an offline interactive graph (:mod:`eventatlas.atlas.page`).
``skos``: ``atlas.ttl``: one ``skos:ConceptScheme`` per inventory, one
``skos:Concept`` per node (``skos:prefLabel``, ``skos:definition``, ``skos:inScheme``), declared links as
SKOS relations where SKOS has one (a hand mapping -> ``skos:closeMatch``; a parent relation ->
``skos:broader``) and every link, declared or learned, as an ``ea:Link`` resource carrying its
relation, kind, score, method, encoder and evidence mention ids, so nothing is lost in the round trip.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from ..escaping import csv_cell
from ..io import atomic_path

FORMATS = ("csv", "jsonl", "skos", "html")
EA = "urn:eventatlas:"
# declared relations that mean "source is narrower than target"
BROADER = {"Inheritance", "Subframe", "SUBSUPER", "subclass_of", "part_of", "P279", "P361"}
NODE_FIELDS = ("node_id", "inventory", "kind", "type_id", "name", "definition", "parent_id", "ontology", "dataset",
               "run_id", "n_mentions", "evidence_mention_ids")
LINK_FIELDS = ("source", "target", "relation", "kind", "score", "raw_score", "rank", "method", "calibration", "encoder",
               "run_id", "provenance", "evidence_mention_ids")


def node_iri(node_id: str) -> str:
    return f"<{EA}node:{quote(node_id, safe='')}>"


def scheme_iri(inventory: str) -> str:
    return f"<{EA}inventory:{quote(inventory, safe='')}>"


def literal(v: Any) -> str:
    """A Turtle literal: strings escaped, numbers typed."""
    if isinstance(v, bool):
        return f'"{str(v).lower()}"^^<http://www.w3.org/2001/XMLSchema#boolean>'
    if isinstance(v, int):
        return f'"{v}"^^<http://www.w3.org/2001/XMLSchema#integer>'
    if isinstance(v, float):
        return f'"{v!r}"^^<http://www.w3.org/2001/XMLSchema#double>'
    s = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{s}"'


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def skos_turtle(nodes: Iterable[Mapping[str, Any]], links: Iterable[Mapping[str, Any]]) -> str:
    out = ["@prefix skos: <http://www.w3.org/2004/02/skos/core#> .", f"@prefix ea: <{EA}vocab#> .", ""]
    nodes, links = list(nodes), list(links)
    for inv in sorted({n["inventory"] for n in nodes}):
        out.append(f"{scheme_iri(inv)} a skos:ConceptScheme ; skos:prefLabel {literal(inv)} .")
    for n in nodes:
        props = [f"skos:inScheme {scheme_iri(n['inventory'])}", f"ea:nodeId {literal(n['node_id'])}",
                 f"ea:kind {literal(n['kind'])}"]
        if _present(n.get("name")):
            props.append(f"skos:prefLabel {literal(n['name'])}@en")
        if _present(n.get("definition")):
            props.append(f"skos:definition {literal(n['definition'])}@en")
        if _present(n.get("n_mentions")):
            props.append(f"ea:mentions {literal(int(n['n_mentions']))}")
        out.append(f"{node_iri(n['node_id'])} a skos:Concept ;\n    " + " ;\n    ".join(props) + " .")
    for k, l in enumerate(links):
        if l["kind"] == "declared":
            if l["relation"] == "maps_to":
                out.append(f"{node_iri(l['source'])} skos:closeMatch {node_iri(l['target'])} .")
            elif l["relation"] in BROADER:
                out.append(f"{node_iri(l['source'])} skos:broader {node_iri(l['target'])} .")
        props = [f"ea:source {node_iri(l['source'])}", f"ea:target {node_iri(l['target'])}"]
        for f in ("relation", "kind", "score", "raw_score", "rank", "method", "calibration", "encoder", "run_id",
                  "provenance"):
            v = l.get(f)
            if _present(v):
                props.append(f"ea:{f} {literal(int(v) if f == 'rank' else float(v) if f in ('score', 'raw_score') else v)}")
        for m in l.get("evidence_mention_ids") or ():
            props.append(f"ea:evidence {literal(m)}")
        out.append(f"<{EA}link:{k}> a ea:Link ;\n    " + " ;\n    ".join(props) + " .")
    return "\n".join(out) + "\n"


def _cell(v: Any) -> Any:
    """A CSV cell: lists ``|``-joined; text a spreadsheet would run as a formula neutralised (:func:`csv_cell`)."""
    if isinstance(v, (list, tuple)):
        v = "|".join(str(x) for x in v)
    return "" if v is None else csv_cell(v)


def export(nodes: Sequence[Mapping[str, Any]], links: Sequence[Mapping[str, Any]], fmt: str, out_dir: str | Path,
           sentences: Mapping[str, str] | None = None) -> list[Path]:
    """Write the atlas in ``fmt`` under ``out_dir`` (atomically, file by file); returns the paths.
    ``sentences`` (mention id -> text) feeds the HTML page's evidence."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    out = Path(out_dir)
    if fmt == "html":
        from .page import write_html

        return [write_html(nodes, links, out, sentences)]
    if fmt == "skos":
        path = out / "atlas.ttl"
        with atomic_path(path) as tmp:
            tmp.write_text(skos_turtle(nodes, links), encoding="utf-8")
        return [path]
    paths = []
    for name, rows, fields in (("atlas_nodes", nodes, NODE_FIELDS), ("atlas_links", links, LINK_FIELDS)):
        path = out / f"{name}.{fmt}"
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
            if fmt == "csv":
                w = csv.writer(fh)
                w.writerow(fields)
                for r in rows:
                    w.writerow([_cell(r.get(f)) for f in fields])
            else:
                for r in rows:
                    fh.write(json.dumps({f: r.get(f) if _present(r.get(f)) else None for f in fields},
                                        default=str) + "\n")
        paths.append(path)
    return paths
