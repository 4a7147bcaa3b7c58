"""``discover``: a dataset's event types (:func:`eventatlas.discover.run.discover`), its mentions detected first
when a detector is given (:func:`eventatlas.pipelines.detect.detect`, its shards on the engine's runner); the
types, assignments and links land in a run directory."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .engine import Engine


def discover(dataset: str, k: int | None = None, link_to: list[str] | None = None, detector: str | None = None,
             algorithm: str = "agglomerative", encoder: str | None = None, seed: int = 0, device: str = "auto",
             threshold: float | None = None, *, engine: Engine) -> dict[str, Any]:
    """The summary of :func:`eventatlas.discover.run.discover` (with ``detected``: the detection's manifest
    when a detector ran)."""
    from .. import config
    from ..discover.run import DiscoverConfig, record
    from ..discover.run import discover as run
    from ..tracking.runinfo import new_run_id, utcnow
    from .detect import target

    ddir, _ = target(dataset, None)
    detected = None
    if detector is not None:
        detected = engine.step("detect", _detect)(str(ddir), detector, device, threshold, engine)
        ddir = Path(detected["dataset_dir"])
    cfg = DiscoverConfig(k=k, algorithm=algorithm, encoder=encoder, link_to=list(link_to or []), seed=seed,
                         device=device)
    out = config.runs_dir() / new_run_id(f"discover-{ddir.name}")
    started = utcnow().isoformat()
    try:
        summary = engine.step("discover", run)(ddir, out, cfg, say=engine.say)
    except ValueError:  # bad input (InputError among them), refused in one line: no run to record
        raise
    except Exception as e:  # a failure of the run itself: recorded as a failed run, then raised
        engine.publish([str(record(out, ddir, cfg, None, started, e))])
        raise
    published = engine.publish([str(record(out, ddir, cfg, summary, started))])
    return {**summary, "run_id": out.name, "detected": detected, "published": published}


def _detect(dataset_dir: str, detector: str, device: str, threshold: float | None, engine: Engine) -> dict[str, Any]:
    from .detect import detect

    return detect(dataset_dir, detector, None, threshold, device, engine=engine)["manifest"]
