"""Test helper: an atlas (nodes and learned links given as rows) written as Parquet parts and published."""
from __future__ import annotations

import shutil

import pyarrow as pa

# Debian's headless browser, for the page tests (they skip without it)
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None)


def publish_atlas_rows(tmp_path, nodes, links):
    """``nodes`` and ``links`` as the atlas parts ``nodes/all`` and ``learned/all`` under ``tmp_path/atlas``,
    published to the warehouse (the environment's)."""
    from eventatlas.atlas.inventory import NODES
    from eventatlas.atlas.links import LINKS
    from eventatlas.io import atomic_write_json, sha256_file, write_parquet
    from eventatlas.store.publishing import publish_atlas

    root = tmp_path / "atlas"
    parts = {}
    for name, kind, table in (("nodes/all", "nodes", pa.Table.from_pylist(nodes, schema=NODES)),
                              ("learned/all", "learned", pa.Table.from_pylist(links, schema=LINKS))):
        p = write_parquet(table, root / kind / "all.parquet")
        parts[name] = {"kind": kind, "fingerprint": "f", "path": str(p.relative_to(root)), "rows": table.num_rows,
                       "sha256": sha256_file(p)}
    atomic_write_json(root / "manifest.json", {"format": 1, "parts": parts})
    publish_atlas(root)


def dump_dom(chromium: str, page, fragment: str, tmp_path) -> str:
    """The DOM of ``page`` (with URL fragment ``fragment``) after headless Chromium ran its scripts; fails the
    test if Chromium fails or the page logs anything to the console (a script error)."""
    import subprocess

    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={tmp_path / 'chromium'}", "--enable-logging=stderr", "--log-level=0"]
    r = subprocess.run(flags + ["--dump-dom", page.resolve().as_uri() + fragment], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln] == []
    return r.stdout
