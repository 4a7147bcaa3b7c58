"""Test helper: an atlas (nodes and learned links given as rows) written as Parquet parts and published."""
from __future__ import annotations

import pyarrow as pa


def publish_atlas_rows(tmp_path, nodes, links):
    """``nodes`` and ``links`` as the atlas parts ``nodes/all`` and ``learned/all`` under ``tmp_path/atlas``,
    published to the warehouse (the environment's)."""
    from eventatlas.atlas.inventory import NODES
    from eventatlas.atlas.links import LINKS
    from eventatlas.io import atomic_write_json, sha256_file, write_parquet
    from eventatlas.results.publishing import publish_atlas

    root = tmp_path / "atlas"
    parts = {}
    for name, kind, table in (("nodes/all", "nodes", pa.Table.from_pylist(nodes, schema=NODES)),
                              ("learned/all", "learned", pa.Table.from_pylist(links, schema=LINKS))):
        p = write_parquet(table, root / kind / "all.parquet")
        parts[name] = {"kind": kind, "fingerprint": "f", "path": str(p.relative_to(root)), "rows": table.num_rows,
                       "sha256": sha256_file(p)}
    atomic_write_json(root / "manifest.json", {"format": 1, "parts": parts})
    publish_atlas(root)
