"""Token ids tokenized once per (tokenizer, max_length, representation, data) and cached on disk.

Training runs several epochs (and several seeds or losses) over the same mentions: windowed token
ids are computed once and stored as Parquet (``ids``, ``target``, ``window`` lists) under
``cache_dir()/tokens/``. The key hashes the tokenizer files (``encode.model_fingerprint``), the
effective max_length, the representation, the mask token, the inputs format and the content of the
mentions (sentences + offsets), so a change of model, length or data is a different entry.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Sequence

from .. import config
from .inputs import ModelInput

log = logging.getLogger(__name__)

INPUTS_FORMAT = 1  # bump when modeling.inputs changes what it produces


def content_hash(sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> str:
    h = hashlib.sha256()
    for s, a, b in zip(sentences, starts, ends):
        h.update(f"{a}\x1f{b}\x1f{s}\x1e".encode("utf-8", "surrogatepass"))
    h.update(str(len(sentences)).encode())
    return h.hexdigest()[:20]


def cache_key(encoder, representation: str, data_hash: str) -> str:
    from .encode import model_fingerprint

    fields = {"format": INPUTS_FORMAT, "model": model_fingerprint(encoder.model_id)["hash"],
              "max_length": encoder.max_length, "representation": representation, "mask": encoder.mask.text,
              "data": data_hash}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:24]


def tokenize_cached(encoder, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int],
                    representation: str, *, cache_dir: str | Path | None = None) -> tuple[list[ModelInput], bool]:
    """Inputs for every mention, from the cache when present; returns (inputs, cache_hit)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io import write_parquet

    root = Path(cache_dir) if cache_dir is not None else config.cache_dir() / "tokens"
    path = root / f"{representation}.{cache_key(encoder, representation, content_hash(sentences, starts, ends))}.parquet"
    if path.exists():
        t = pq.read_table(path).to_pydict()
        if len(t["ids"]) == len(sentences):
            return [ModelInput(i, tg, w) for i, tg, w in zip(t["ids"], t["target"], t["window"])], True
        log.warning("token cache %s has %d rows for %d mentions: rebuilding", path, len(t["ids"]), len(sentences))
    items = encoder.prepare(sentences, starts, ends, representation)
    lst = pa.list_(pa.int32())
    write_parquet(pa.table({"ids": pa.array([it.ids for it in items], lst),
                            "target": pa.array([it.target for it in items], lst),
                            "window": pa.array([it.window for it in items], lst)}), path)
    return items, False
