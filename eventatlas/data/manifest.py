"""The typed manifest of an ingested dataset (what ``eventatlas.data.ingest`` and the wiki builder write).

A dataset directory is ``<datasets_dir>/<name>/<table>.parquet`` plus ``manifest.json``, written
last: a directory without a manifest is not a dataset. :class:`Manifest` gives its fields types,
the dataset's *kinds* (what methods can run on it) and its *fingerprint* (what a run records).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import config

# What a dataset can be used for; methods declare the kinds they apply to.
KINDS = {
    "mentions": "event mentions in text (any labels)",
    "typed_mentions": "mentions with gold event types (clustering / type induction, retrieval)",
    "event_pairs": "event-pair similarity benchmarks (hard similarity, transitive, MCNC)",
    "grounding": "mentions grounded to a set of events of a hierarchy (label sets + event_types.parent_id)",
    "event_cooccurrence": "events with within-document co-occurrence counts (event_pairs task 'cooccurrence', "
                          "e.g. the event_tuples reader): training data for event representations (SWCC)",
    "text": "documents split into sentences and tokens, no mentions: input for event detection",
}
_KNOWN = {"dataset", "schema_version", "rows", "reader", "source", "fingerprint", "rejects", "stats", "options",
          "language", "ontology", "ingested_at", "seconds", "path"}


@dataclass(frozen=True)
class Manifest:
    dataset: str
    path: Path
    schema_version: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    reader: str | None = None
    source: str | None = None
    fingerprint: str | None = None
    rejects: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    language: str | None = None
    ontology: str | None = None
    ingested_at: str | None = None
    seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other keys (e.g. a wiki build's build_id)

    @classmethod
    def read(cls, dataset_dir: str | Path) -> "Manifest":
        d = Path(dataset_dir)
        p = d / "manifest.json"
        if not p.exists():
            raise FileNotFoundError(f"{d}: no manifest.json (dataset absent or its ingest unfinished)")
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ValueError(f"{p}: not valid JSON ({e})") from e
        rejects = raw.get("rejects") if isinstance(raw.get("rejects"), dict) else raw.get("rejects_by_reason") or {}
        return cls(dataset=raw.get("dataset") or d.name, path=d, schema_version=raw.get("schema_version"),
                   rows={k: int(v) for k, v in (raw.get("rows") or {}).items()}, reader=raw.get("reader"),
                   source=raw.get("source"), fingerprint=raw.get("fingerprint"), rejects=dict(rejects),
                   stats=raw.get("stats") or {}, options=raw.get("options") or {}, language=raw.get("language"),
                   ontology=raw.get("ontology"), ingested_at=raw.get("ingested_at"), seconds=raw.get("seconds"),
                   extra={k: v for k, v in raw.items() if k not in _KNOWN})

    @property
    def name(self) -> str:
        return self.path.name

    def table(self, name: str) -> Path:
        return self.path / f"{name}.parquet"

    def read_table(self, name: str, columns: list[str] | None = None):
        """The dataset's ``name`` table (a ``pyarrow.Table``); a missing table is a one-line error naming it."""
        return read_table(self.path, name, columns)

    def type_texts(self, use: str = "name") -> dict[str, str]:
        """type_id -> its name (``use="name"``) or definition (falling back to the name, then the id)."""
        import pyarrow.parquet as pq

        p = self.table("event_types")
        if not p.exists():
            return {}
        out = {}
        for r in pq.read_table(p, columns=["type_id", "name", "definition"]).to_pylist():
            text = r["definition"] if use == "definition" and r["definition"] else r["name"]
            out[r["type_id"]] = text or r["type_id"]
        return out

    def data_fingerprint(self) -> str:
        """What a run records about its data: the ingested input's fingerprint, else a content hash."""
        if self.fingerprint:
            return self.fingerprint
        from ..io import fingerprint_paths

        return fingerprint_paths([self.table("mentions"), self.table("event_pairs"), self.table("event_types"),
                                  self.table("sentences")])  # absent files add nothing

    def max_labels(self) -> int:
        """The largest label-set size of any mention (0: unlabelled; > 1: label sets, e.g. grounding)."""
        return self._max_labels

    @cached_property
    def _max_labels(self) -> int:  # one scan per manifest: train-all asks once per method
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        p = self.table("mentions")
        if not self.rows.get("mentions", 1) or not p.exists():
            return 0
        best = 0
        for batch in pq.ParquetFile(p).iter_batches(columns=["labels"], batch_size=65_536):
            n = pc.max(pc.list_value_length(batch.column(0))).as_py()
            best = max(best, n or 0)
        return best

    def has_labels(self) -> bool:
        """At least one mention with a non-empty label list."""
        return self.max_labels() > 0

    def kinds(self) -> frozenset[str]:
        out = set()
        if self.rows.get("mentions", 0):
            out.add("mentions")
            n = self.max_labels()
            if n:
                out.add("typed_mentions")
            # label *sets* over a hierarchy (event + its ancestors) make a grounding dataset
            if n > 1 and self.rows.get("event_types", 0) and _has_hierarchy(self.table("event_types")):
                out.add("grounding")
        # co-occurrence pairs (stats["cooccurring_pairs"], the event_tuples reader) are training data, not a
        # similarity benchmark: "event_pairs" only when benchmark pairs remain beside them
        co = int(self.stats.get("cooccurring_pairs", 0) or 0)
        if self.rows.get("event_pairs", 0) > co:
            out.add("event_pairs")
        if co:
            out.add("event_cooccurrence")
        # a plain corpus (the text reader); a dataset of detected mentions keeps the sentences but is mentions
        if self.rows.get("sentences", 0) and not self.rows.get("mentions", 0):
            out.add("text")
        return frozenset(out)


def table_path(dataset_dir: str | Path, name: str) -> Path:
    """Where an ingested dataset keeps its ``name`` table (``mentions``, ``event_pairs``, ``event_types``, ...)."""
    return Path(dataset_dir) / f"{name}.parquet"


def table_rows(dataset_dir: str | Path, name: str) -> int:
    """Rows of the dataset's ``name`` table from its Parquet footer (0 when the table is absent)."""
    import pyarrow.parquet as pq

    p = table_path(dataset_dir, name)
    return pq.ParquetFile(p).metadata.num_rows if p.exists() else 0


def read_table(dataset_dir: str | Path, name: str, columns: list[str] | None = None):
    """One table of an ingested dataset (a ``pyarrow.Table``, ``columns`` only if given): the one way the
    methods and model families read dataset tables. A missing table is a one-line error naming it."""
    import pyarrow.parquet as pq

    p = table_path(dataset_dir, name)
    if not p.exists():
        raise FileNotFoundError(f"{Path(dataset_dir)}: dataset has no {name} table ({p.name}; not ingested?)")
    return pq.read_table(p, columns=columns)


def _has_hierarchy(event_types: Path) -> bool:
    import pyarrow.parquet as pq

    if not event_types.exists():
        return False
    return any(v for v in pq.read_table(event_types, columns=["parent_id"]).column(0).to_pylist())


def find_dataset(name: str | Path, what: str = "dataset") -> Path:
    """The directory of an ingested dataset given by name (under the data root) or directory; refused in one
    line naming ``what`` and where its manifest was looked for."""
    d = Path(name) if Path(name).is_dir() else config.datasets_dir() / str(name)
    if not (d / "manifest.json").exists():
        raise ValueError(f"{what} {str(name)!r} is not ingested (no {d / 'manifest.json'})")
    return d


def ingested(datasets_dir: str | Path | None = None) -> dict[str, Manifest]:
    """name -> manifest of every dataset whose manifest landed, sorted by name."""
    root = Path(datasets_dir) if datasets_dir else config.datasets_dir()
    if not root.exists():
        return {}
    return {p.parent.name: Manifest.read(p.parent) for p in sorted(root.glob("*/manifest.json"))}
