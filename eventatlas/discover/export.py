"""Exports of a discover run, each one file written atomically (``eventatlas discover --format``):

* ``html``: ``page.html``, the run's offline page (:mod:`eventatlas.discover.page`);
* ``csv``: ``types.csv``, one row per type (:data:`CSV_FIELDS`; triggers ``|``-joined, the first example; a
  text cell a spreadsheet would run as a formula gets a leading ``'``);
* ``jsonl``: ``types.jsonl``, one JSON object per type: its card and its learned links (every scorer);
* ``skos``: ``types.ttl``, RDF Turtle: a ``skos:ConceptScheme`` for the run, one ``skos:Concept`` per type
  (``skos:prefLabel`` its name, ``skos:example`` its example sentences, ``skos:notation`` its type id, the
  atlas node id, size, triggers and verdict under ``ea:``) and, when it was linked, ``skos:closeMatch`` to its
  best known type if it is judged known, ``skos:relatedMatch`` if it is judged new (the nearest, but far).

IRIs: under ``urn:eventatlas:`` (:data:`eventatlas.atlas.export.EA`), the scheme
``urn:eventatlas:discover:<run id>``, a type ``urn:eventatlas:discover:<run id>/<type id>`` (run and type id
percent-encoded), a known type the atlas export's node IRI (``urn:eventatlas:node:<node id>``), so the two
exports join.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import quote

from ..atlas.export import EA, literal, node_iri
from .page import PAGE_NAME, html_page, load_run, type_of_node

FORMATS = ("html", "csv", "jsonl", "skos")
FILES = {"html": PAGE_NAME, "csv": "types.csv", "jsonl": "types.jsonl", "skos": "types.ttl"}
CSV_FIELDS = ("type_id", "name", "size", "new", "best_link", "best_score", "triggers", "example")
LINK_FIELDS = ("target", "relation", "method", "rank", "score", "raw_score", "calibration", "encoder",
               "evidence_mention_ids")


def parse_formats(values: Iterable[str] | None) -> list[str]:
    """Formats given repeated or comma-separated, in order, once each; an unknown one raises ValueError."""
    out: list[str] = []
    for v in values or ():
        for f in (p.strip().lower() for p in str(v).split(",")):
            if f and f not in FORMATS:
                raise ValueError(f"--format {f!r}: use one of {', '.join(FORMATS)}")
            if f and f not in out:
                out.append(f)
    return out


def _links_by_type(run: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in run["links"]:
        out.setdefault(type_of_node(r["source"]), []).append({f: r.get(f) for f in LINK_FIELDS})
    return out


def csv_text(run: Mapping[str, Any]) -> str:
    from ..escaping import csv_cell

    def cell(v: Any) -> Any:
        if isinstance(v, bool):
            return str(v).lower()
        return "" if v is None else csv_cell(v)

    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(CSV_FIELDS)
    for t in run["types"]:
        w.writerow([cell(v) for v in (t["type_id"], t.get("name"), t.get("size"), t.get("new"), t.get("best_link"),
                                      t.get("best_score"), "|".join(t.get("triggers") or []),
                                      (t.get("examples") or [None])[0])])
    return buf.getvalue()


def jsonl_text(run: Mapping[str, Any]) -> str:
    links = _links_by_type(run)
    rows = [{"run_id": run["run_id"], "dataset": run["summary"].get("dataset"), **t,
             "links": links.get(t["type_id"], [])} for t in run["types"]]
    return "".join(json.dumps(r, ensure_ascii=False, default=str, allow_nan=False) + "\n" for r in rows)


def scheme_iri(run_id: str) -> str:
    return f"<{EA}discover:{quote(run_id, safe='')}>"


def type_iri(run_id: str, type_id: str) -> str:
    return f"<{EA}discover:{quote(run_id, safe='')}/{quote(type_id, safe='')}>"


def skos_turtle(run: Mapping[str, Any]) -> str:
    rid, s = run["run_id"], run["summary"]
    dataset = str(s.get("dataset"))
    inventory = s.get("inventory") or f"discover:{dataset}"
    scheme = [f"skos:prefLabel {literal(f'event types discovered in {dataset} (run {rid})')}@en",
              f"ea:runId {literal(rid)}", f"ea:dataset {literal(dataset)}",
              f"ea:mentions {literal(int(s.get('mentions') or 0))}"]
    out = ["@prefix skos: <http://www.w3.org/2004/02/skos/core#> .", f"@prefix ea: <{EA}vocab#> .", "",
           f"{scheme_iri(rid)} a skos:ConceptScheme ;\n    " + " ;\n    ".join(scheme) + " ."]
    for t in run["types"]:
        props = [f"skos:inScheme {scheme_iri(rid)}", f"skos:notation {literal(t['type_id'])}",
                 f"ea:nodeId {literal(f'{inventory}::' + t['type_id'])}"]
        if t.get("name"):
            props.append(f"skos:prefLabel {literal(t['name'])}@en")
        props += [f"skos:example {literal(e)}@en" for e in t.get("examples") or []]
        props.append(f"ea:size {literal(int(t.get('size') or 0))}")
        props += [f"ea:trigger {literal(f)}" for f in t.get("triggers") or []]
        if t.get("new") is not None:
            props.append(f"ea:new {literal(bool(t['new']))}")
        if t.get("best_link"):
            props.append(f"{'skos:relatedMatch' if t.get('new') else 'skos:closeMatch'} {node_iri(t['best_link'])}")
            if t.get("best_score") is not None:
                props.append(f"ea:bestScore {literal(float(t['best_score']))}")
        out.append(f"{type_iri(rid, t['type_id'])} a skos:Concept ;\n    " + " ;\n    ".join(props) + " .")
    return "\n".join(out) + "\n"


def export(run_dir: str | Path, formats: Iterable[str], out_dir: str | Path | None = None, *,
           datasets_dir: str | Path | None = None) -> list[Path]:
    """Write the discover run in ``run_dir`` in each of ``formats`` into ``out_dir`` (default the run
    directory), file by file atomically; returns the paths, in the order of ``formats``."""
    from ..io import atomic_write_text

    fmts = parse_formats(formats)
    run = load_run(run_dir, datasets_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir)
    write = {"html": html_page, "csv": csv_text, "jsonl": jsonl_text, "skos": skos_turtle}
    paths = []
    for f in fmts:
        path = out / FILES[f]
        atomic_write_text(path, write[f](run))
        paths.append(path)
    return paths
