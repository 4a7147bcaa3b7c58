"""``atlas``: build the atlas incrementally (only what a new dataset, run or encoder changes), land its parts
in the warehouse, and publish the gold scores of the pairs scored now (a run of task ``atlas``)."""
from __future__ import annotations

from typing import Any, Sequence

from .engine import Engine


def build_step(datasets: list[str] | None = None, runs: list[str] | None = None,
               pairs: Sequence[Sequence[str]] | None = None, encoders: list[str | None] | None = None,
               config: dict[str, Any] | None = None, root: str | None = None, full: bool = False,
               prune: bool = True) -> dict[str, Any]:
    """:func:`eventatlas.atlas.build.build` (only the parts whose inputs changed) and the run record of the
    pairs scored against the gold (``record``: its path, or None)."""
    from ..atlas.build import build, write_record
    from ..atlas.link import LinkConfig

    cfg = LinkConfig(**(config or {}))
    encs = encoders or [None]
    rep = build(datasets=datasets, runs=runs, pairs=[tuple(p) for p in pairs] if pairs else None, encoders=encs,
                cfg=cfg, root=root, full=full, prune=prune)
    record = write_record(rep, encoders=encs, cfg=cfg)
    return {**rep.as_dict(), "record": str(record) if record else None}


def land_step(root: str, warehouse_path: str | None = None, *, warn: Any = None) -> dict[str, Any]:
    """:func:`eventatlas.store.publishing.publish_atlas`: land the changed parts in the warehouse."""
    from ..store.publishing import publish_atlas

    return publish_atlas(root, warehouse_path=warehouse_path, warn=warn)


def atlas(datasets: list[str] | None = None, runs: list[str] | None = None,
          pairs: Sequence[Sequence[str]] | None = None, encoders: list[str | None] | None = None,
          config: dict[str, Any] | None = None, full: bool = False, prune: bool = True,
          warehouse_path: str | None = None, *, engine: Engine) -> dict[str, Any]:
    """``datasets`` / ``runs``: the inventories (default: every ingested dataset with event types and every
    run with clusterings); ``pairs``: ``[[source, target], ...]`` (default: every non-FrameNet inventory ->
    every FrameNet one); ``encoders``: HF ids, paths or ``run:<id>`` (default: the frozen MiniLM);
    ``config``: :class:`eventatlas.atlas.link.LinkConfig` fields; ``full``: rebuild every part.
    ``{"build", "landed", "published"}``."""
    built = engine.step("atlas-build", build_step)(datasets, runs, pairs, encoders, config, None, full, prune)
    engine.say(f"atlas: {len(built['built'])} parts built, {len(built['kept'])} kept, {len(built['removed'])} "
               f"removed in {built['seconds']:.1f}s")
    landed = engine.step("atlas-land", lambda root, wh: land_step(root, wh, warn=engine.warn))(built["root"],
                                                                                               warehouse_path)
    published = engine.publish([built["record"]]) if built["record"] else None
    return {"build": built, "landed": landed, "published": published}
