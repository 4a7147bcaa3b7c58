"""``detect``: find event mentions in a dataset's sentences with a saved detector, write them as a new
dataset and record that in the warehouse (a run record like an ingest's: its tables and manifest).

The sentences are split into shards by document (:func:`eventatlas.detection.apply.shard_of`); each shard is one
job of the engine's ``map`` (here one after another, or on the runner's workers), writing a part; this process
then writes the dataset from the parts (:func:`eventatlas.detection.apply.assemble`), the one writer of it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .engine import Engine

SHARD_JOB = "eventatlas.pipelines.detect:shard_job"


def target(dataset: str, name: str | None) -> tuple[Path, str]:
    """(the source dataset's directory, the new dataset's name), refused before any work: ``dataset`` a name
    under the data root or a dataset directory; ``name`` default ``<dataset>_detected``."""
    from .. import config
    from ..names import check_name

    src = Path(dataset) if Path(dataset).is_dir() else config.datasets_dir() / check_name(dataset, "dataset")
    if not (src / "manifest.json").exists():
        raise FileNotFoundError(f"no dataset {dataset!r} at {src} (`eventatlas datasets` lists them; ingest your text "
                                "with `eventatlas ingest text --path FILES --dataset NAME`)")
    out_name = check_name(name or f"{src.name}_detected", "dataset")
    if config.datasets_dir() / out_name == src.resolve():
        raise ValueError(f"--name {out_name}: the detected mentions would replace the dataset they were found in; "
                         "name a new dataset")
    return src, out_name


def shard_job(dataset_dir: str, model: str, part_dir: str, name: str, shard: int = 0, shards: int = 1,
              threshold: float | None = None, device: str = "auto", batch_size: int = 64,
              vectors: bool = False) -> dict[str, Any]:
    """One shard on whatever worker runs it (:func:`eventatlas.detection.apply.detect_part`): the device and
    precision resolved there."""
    from ..detection.apply import detect_part
    from ..modeling.device import resolve_device, resolve_precision

    dev = resolve_device(device)
    return detect_part(dataset_dir, model, part_dir, name=name, shard=shard, shards=shards, device=dev,
                       precision=resolve_precision("auto", dev), threshold=threshold, batch_size=batch_size,
                       vectors=vectors)


def detect(dataset: str, model: str, name: str | None = None, threshold: float | None = None,
           device: str = "auto", batch_size: int = 64, shards: int = 1, *, engine: Engine,
           vectors_dir: str | None = None) -> dict[str, Any]:
    """``{"manifest", "published"}``: the new dataset's manifest and what the publish path did with its record.
    ``vectors_dir``: the detected mentions' same-pass trigger vectors go there too
    (:func:`eventatlas.detection.apply.assemble_vectors`)."""
    import shutil
    import tempfile

    from .. import config
    from ..detection.apply import assemble
    from ..modeling.saved import ModelError, resolve_ref
    from ..tracking.records import ingest_record
    from ..tracking.runinfo import utcnow

    if shards < 1:
        raise ValueError(f"--shards {shards}: expected a positive number of shards")
    started = utcnow().isoformat()
    src, out_name = target(dataset, name)
    card = resolve_ref(model).card  # a missing or wrong model is refused here, before any worker starts
    if card.method != "event_detection":
        raise ModelError(f"{model} is a {card.method} model, not a detector (train one: "
                         "`eventatlas train event_detection DATASET`)")
    config.datasets_dir().mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_name}-parts-", dir=config.datasets_dir()))
    try:
        jobs = [{"dataset_dir": str(src), "model": model, "part_dir": str(scratch / f"part-{i}"), "name": out_name,
                 "shard": i, "shards": shards, "threshold": threshold, "device": device, "batch_size": batch_size,
                 **({"vectors": True} if vectors_dir is not None else {})}
                for i in range(shards)]
        engine.say(f"detect {out_name}: {src.name} in {shards} shard(s)")
        t0 = time.perf_counter()
        parts = engine.map(SHARD_JOB, jobs)
        manifest = assemble(src, parts, config.datasets_dir() / out_name, name=out_name,
                            seconds=time.perf_counter() - t0, vectors_dir=vectors_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    params = {"detect": dataset, "model": model, "name": name, "threshold": threshold, "device": device,
              "shards": shards}
    published = engine.publish([str(ingest_record(manifest, params, started))])
    return {"manifest": manifest, "published": published}
