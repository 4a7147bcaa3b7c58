"""Clustering evaluation (type / frame induction): partitions vs gold primary labels."""
from __future__ import annotations

from typing import Any, Hashable, Iterable, Mapping, Sequence

from .base import metric_rows


def evaluate_partitions(partitions: Mapping[tuple[str | None, str | None], Sequence[Hashable]],
                        y_true: Sequence[Hashable], *, dataset: str, method: str, seed: int, split: str | None = None,
                        setting: str | None = None, representation: str | None = None,
                        only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Rows for every ``(variant, algorithm) -> labels`` partition (task ``induction``)."""
    from ..metrics import clustering_scores

    rows: list[dict[str, Any]] = []
    for (variant, algorithm), labels in partitions.items():
        rows += metric_rows(clustering_scores(list(y_true), list(labels)), task="induction", dataset=dataset,
                            method=method, seed=seed, split=split, setting=setting, representation=representation,
                            clustering=algorithm, variant=variant, only=only)
    return rows
