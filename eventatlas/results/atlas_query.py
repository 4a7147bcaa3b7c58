"""Reading the atlas back from the warehouse (read-only): a type's neighbourhood, every row for export."""
from __future__ import annotations

from typing import Any

from ..store.warehouse import Warehouse


def _rows(wh: Warehouse, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cols, rows = wh.query_rows(sql, params)
    return [dict(zip(cols, r)) for r in rows]


def find_nodes(wh: Warehouse, name: str) -> list[dict[str, Any]]:
    """Nodes named by id, else by type id, else by name (case-insensitive)."""
    for where in ("node_id = ?", "type_id = ?", "lower(name) = lower(?)", "lower(type_id) = lower(?)"):
        found = _rows(wh, f"SELECT * EXCLUDE (part) FROM atlas_nodes WHERE {where} ORDER BY node_id", [name])
        if found:
            return found
    return []


def _sentences(wh: Warehouse, ids: list[str], n: int) -> dict[str, str]:
    """mention id -> its sentence with the trigger in [brackets] (from the mentions view)."""
    ids = list(dict.fromkeys(ids))
    if not ids or n <= 0:
        return {}
    try:
        rows = _rows(wh, "SELECT mention_id, sentence, trigger_start, trigger_end FROM mentions "
                         "WHERE list_contains(?, mention_id)", [ids])
    except Exception:  # noqa: BLE001 - no mentions view yet (nothing ingested here): links without sentences
        return {}
    out = {}
    for r in rows:
        s, a, b = r["sentence"], r["trigger_start"], r["trigger_end"]
        out.setdefault(r["mention_id"], f"{s[:a]}[{s[a:b]}]{s[b:]}")
    return out


def neighbourhood(name: str, *, top: int = 5, sentences: int = 3, warehouse_path=None) -> list[dict[str, Any]]:
    """Each node matching ``name`` with its declared links (both directions), its best ``top`` learned links
    per scorer and other inventory, and up to ``sentences`` evidence sentences per link."""
    wh = Warehouse(warehouse_path)
    nodes = find_nodes(wh, name)
    if not nodes:
        raise LookupError(f"no atlas node named {name!r} in {wh.path} (build it with `eventatlas atlas build`)")
    out = []
    for node in nodes:
        nid = node["node_id"]
        declared = [{**r, "direction": "out" if r["source"] == nid else "in",
                     "other": r["target"] if r["source"] == nid else r["source"]}
                    for r in _rows(wh, "SELECT * FROM atlas_links WHERE kind = 'declared' AND (source = ? OR target = ?) "
                                       "ORDER BY relation, source, target", [nid, nid])]
        learned = _rows(wh, """
            SELECT *, split_part(target, '::', 1) AS other_inventory FROM atlas_links
            WHERE kind = 'learned' AND source = ?
            QUALIFY row_number() OVER (PARTITION BY method, encoder, other_inventory ORDER BY rank) <= ?
            ORDER BY other_inventory, method, encoder, rank""", [nid, top])
        # links into this node from other inventories (it is a target): the best of each source per scorer
        learned += _rows(wh, """
            SELECT * FROM atlas_links WHERE kind = 'learned' AND target = ? AND rank = 1
            ORDER BY score DESC NULLS LAST LIMIT ?""", [nid, top])
        text = _sentences(wh, list(node["evidence_mention_ids"] or [])
                          + [m for r in learned for m in (r["evidence_mention_ids"] or [])], sentences)
        for r in learned:
            r["other"] = r["target"] if r["source"] == nid else f"<- {r['source']}"
            r["sentences"] = [text[m] for m in (r["evidence_mention_ids"] or []) if m in text][:sentences]
        out.append({**node, "declared": declared, "learned": learned,
                    "examples": [text[m] for m in (node["evidence_mention_ids"] or []) if m in text][:sentences]})
    return out


def evidence_sentences(links: list[dict[str, Any]], per_link: int = 2, warehouse_path=None) -> dict[str, str]:
    """mention id -> sentence for the first ``per_link`` evidence mentions of each link (the HTML page's)."""
    ids = [m for r in links for m in (r.get("evidence_mention_ids") or [])[:per_link]]
    return _sentences(Warehouse(warehouse_path), ids, 1)


def all_rows(warehouse_path=None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    wh = Warehouse(warehouse_path)
    return (_rows(wh, "SELECT * EXCLUDE (part) FROM atlas_nodes ORDER BY node_id"),
            _rows(wh, "SELECT * EXCLUDE (part) FROM atlas_links ORDER BY kind, source, relation, method, rank, target"))
