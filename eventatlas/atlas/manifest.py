"""An atlas build's manifest (its parts and their fingerprints): :mod:`.build` writes it, the publish path
(:func:`eventatlas.store.publishing.publish_atlas`) reads it to land only the parts that changed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError

ATLAS_MANIFEST = "manifest.json"
ATLAS_FORMAT = 1


def read_atlas_manifest(root: str | Path) -> dict[str, Any]:
    """The manifest of the atlas build under ``root``; an empty one (no parts) where none was written yet."""
    p = Path(root) / ATLAS_MANIFEST
    if not p.exists():
        return {"format": ATLAS_FORMAT, "parts": {}}
    try:
        man = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(p, "file", f"not a JSON atlas manifest ({e})") from None
    man.setdefault("parts", {})
    return man
