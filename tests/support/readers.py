"""Helpers shared by the reader tests."""
from __future__ import annotations

from collections import defaultdict

from eventatlas.io import Rejects


def collect(reader, path, **kw):
    """Run a reader to the end: ({table: [rows]}, rejects, stats)."""
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in reader.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out, r, st


def assert_offsets(mentions):
    """Every trigger (and every located argument) round-trips: sentence[start:end] == text."""
    assert mentions
    for m in mentions:
        assert m["sentence"][m["trigger_start"] : m["trigger_end"]] == m["trigger"], m
        for a in m.get("arguments") or []:
            if a.get("start") is not None:
                assert m["sentence"][a["start"] : a["end"]] == a["text"], (m["mention_id"], a)
