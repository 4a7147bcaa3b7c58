"""``discover``: a dataset's event types (:func:`eventatlas.discover.run.discover`), its mentions detected first
when a detector is given (:func:`eventatlas.pipelines.detect.detect`, its shards on the engine's runner); the
types, assignments and links land in a run directory, with the run's page (:mod:`eventatlas.discover.page`).

With a detector and no other encoder (``encoder`` None or ``"detector"``), the detector's own encoder embeds: the
detection pass keeps each mention's trigger vector (into the run directory's ``embeddings/``), so the text goes
through the encoder once, and the known inventories are embedded with that encoder too (one space)."""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from .engine import Engine

SAME_PASS = "detector"  # --encoder value: the detector's own encoder, its vectors from the detection pass


def discover(dataset: str, k: int | None = None, link_to: list[str] | None = None, detector: str | None = None,
             algorithm: str = "agglomerative", encoder: str | None = None, seed: int = 0, device: str = "auto",
             threshold: float | None = None, *, engine: Engine) -> dict[str, Any]:
    """The summary of :func:`eventatlas.discover.run.discover` (with ``detected``: the detection's manifest
    when a detector ran). ``encoder``: ``"detector"`` (the default with a detector) = the detector's encoder,
    its vectors from the detection pass."""
    from .. import config
    from ..detection.apply import VECTORS
    from ..discover.page import write_page
    from ..discover.run import DiscoverConfig, record
    from ..discover.run import discover as run
    from ..tracking.runinfo import new_run_id, utcnow
    from .detect import target

    ddir, detected_name = target(dataset, None)
    if detector is None and not _has_mentions(ddir):
        detector = newest_detector()
        engine.say(f"{dataset} has no mentions: detecting them with the newest saved detector, {detector} "
                   "(--detector run:<id> picks another)")
    same = detector is not None and encoder in (None, SAME_PASS)
    if encoder == SAME_PASS and detector is None:
        raise ValueError(f"--encoder {SAME_PASS}: the detector's encoder needs --detector run:<id> ({dataset} has "
                         "mentions of its own: no detection runs)")
    if same:
        from ..modeling.saved import resolve_ref

        default = encoder is None
        encoder = resolve_ref(detector).ref  # names its encoder directory (resolve_model) by the run
        engine.say(f"encoder: the detector's own ({encoder}{', the default with a detector' if default else ''}), "
                   "its vectors from the detection pass; --encoder NAME embeds with another")
    out = config.runs_dir() / new_run_id(f"discover-{detected_name if detector is not None else ddir.name}")
    vectors = out / "embeddings" if same else None
    detected = None
    if detector is not None:
        detected = engine.step("detect", _detect)(str(ddir), detector, device, threshold, engine,
                                                  str(vectors) if vectors else None)
        ddir = Path(detected["dataset_dir"])
    cfg = DiscoverConfig(k=k, algorithm=algorithm, encoder=encoder, link_to=list(link_to or []), seed=seed,
                         device=device)
    started = utcnow().isoformat()
    try:
        summary = engine.step("discover", run)(ddir, out, cfg, say=engine.say,
                                               embeddings=vectors / f"{VECTORS}.npy" if vectors else None)
        summary["page"] = str(write_page(out))  # the run's offline page, whichever engine ran it
    except ValueError:  # bad input (InputError among them), refused in one line: no run to record
        if vectors is not None:  # nor the vectors it was given
            shutil.rmtree(vectors, ignore_errors=True)
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    except Exception as e:  # a failure of the run itself: recorded as a failed run, then raised
        engine.publish([str(record(out, ddir, cfg, None, started, e))])
        raise
    published = engine.publish([str(record(out, ddir, cfg, summary, started))])
    return {**summary, "run_id": out.name, "detected": detected, "published": published}


def _detect(dataset_dir: str, detector: str, device: str, threshold: float | None, engine: Engine,
            vectors_dir: str | None = None) -> dict[str, Any]:
    from .detect import detect

    return detect(dataset_dir, detector, None, threshold, device, engine=engine, vectors_dir=vectors_dir)["manifest"]


def _has_mentions(ddir: Path) -> bool:
    from ..data import Manifest

    return bool(Manifest.read(ddir).rows.get("mentions"))


def newest_detector() -> str:
    """``run:<id>`` of the newest saved event_detection model; none: a one-line refusal saying how to get one."""
    from ..modeling.saved import saved_models

    found = [m for m in saved_models() if m.card.method == "event_detection"]
    if not found:
        raise ValueError("no mentions to discover types in and no saved detector to find them: train one with "
                         "`eventatlas train event_detection maven_subset` (or any fully annotated dataset), then "
                         "`eventatlas discover DATASET` uses it, or give --detector run:<id>")
    return found[0].ref
