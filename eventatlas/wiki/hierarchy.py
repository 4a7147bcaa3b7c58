"""Event hierarchy: edge when parent P527 child or child P361 parent; trees of height <= max_height.

Height counts levels (a root alone has height 1). A node may have one parent: with
several, the smallest QID wins (deterministic) and the others are rejected. Edges
that would put a node deeper than ``max_height`` levels are cut; the cut-off part
becomes a tree of its own (and is cut again if needed).
"""
from __future__ import annotations

from typing import Iterable

from eventatlas.io import Rejects

from .wikidata import EventRecord


def _qkey(q: str):
    return (len(q), q)


def raw_edges(events: Iterable[EventRecord]) -> set[tuple[str, str]]:
    """(child, parent) pairs among the given events."""
    evs = {e.qid: e for e in events}
    edges = set()
    for e in evs.values():
        for p in e.part_of:
            if p in evs and p != e.qid:
                edges.add((e.qid, p))
        for c in e.has_part:
            if c in evs and c != e.qid:
                edges.add((c, e.qid))
    return edges


def build_hierarchy(events: Iterable[EventRecord], rejects: Rejects, *, max_height: int = 3, source: str = "hierarchy") -> dict[str, str]:
    """Return child -> parent of the pruned forest."""
    evs = list(events)
    cands: dict[str, list[str]] = {}
    for c, p in raw_edges(evs):
        cands.setdefault(c, []).append(p)
    parent: dict[str, str] = {}
    for c in sorted(cands, key=_qkey):
        ps = sorted(cands[c], key=_qkey)
        parent[c] = ps[0]
        for p in ps[1:]:
            rejects.add(source, f"{c}->{p}", "hierarchy_multi_parent", f"{c} keeps parent {ps[0]}")
    # break cycles: walk up; an edge closing a cycle is dropped
    for c in sorted(parent, key=_qkey):
        seen, x = [c], c
        while x in parent:
            x = parent[x]
            if x in seen:
                a = seen[-1]
                rejects.add(source, f"{a}->{x}", "hierarchy_cycle", "edge closes a part-of cycle")
                del parent[a]
                break
            seen.append(x)
    children: dict[str, list[str]] = {}
    for c, p in parent.items():
        children.setdefault(p, []).append(c)
    roots = sorted({e.qid for e in evs} - set(parent), key=_qkey)
    final: dict[str, str] = {}
    stack = [(r, 1) for r in roots]
    while stack:
        node, level = stack.pop()
        for ch in sorted(children.get(node, ()), key=_qkey):
            if level + 1 > max_height:
                rejects.add(source, f"{ch}->{node}", "hierarchy_depth_cut", f"{ch} would be at level {level + 1} > {max_height}")
                stack.append((ch, 1))  # starts a tree of its own
            else:
                final[ch] = node
                stack.append((ch, level + 1))
    return final


def ancestors(qid: str, parent: dict[str, str]) -> list[str]:
    out, x = [], qid
    while x in parent:
        x = parent[x]
        out.append(x)
    return out


def label_set(qid: str, parent: dict[str, str]) -> list[str]:
    """Gold labels of a mention: its atomic event, then its ancestors up to the root."""
    return [qid] + ancestors(qid, parent)


def tree_stats(parent: dict[str, str], nodes: Iterable[str]) -> dict[str, float]:
    """Trees (roots with >=1 child), average children per internal node, max depth (levels)."""
    nodes = set(nodes)
    kids: dict[str, int] = {}
    for c, p in parent.items():
        if c in nodes and p in nodes:
            kids[p] = kids.get(p, 0) + 1
    roots = [n for n in nodes if n not in parent and n in kids]
    depth = max((len(ancestors(n, parent)) + 1 for n in nodes if n in parent or n in kids), default=0)
    return {"trees": len(roots), "avg_children": (sum(kids.values()) / len(kids)) if kids else 0.0, "max_depth": depth}
