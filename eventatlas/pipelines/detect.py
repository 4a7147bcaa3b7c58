"""``detect``: find event mentions in a dataset's sentences with a saved detector, write them as a new
dataset and record that in the warehouse (a run record like an ingest's: its tables and manifest)."""
from __future__ import annotations

from typing import Any

from .engine import Engine


def detect_step(dataset: str, model: str, name: str | None = None, threshold: float | None = None,
                device: str = "auto", batch_size: int = 64) -> dict[str, Any]:
    """The job itself (:func:`eventatlas.detection.apply.detect`): ``dataset`` a name under the data root or a
    dataset directory; ``name`` the new dataset (default ``<dataset>_detected``)."""
    from pathlib import Path

    from .. import config
    from ..detection.apply import detect as detect_in
    from ..modeling.device import resolve_device, resolve_precision
    from ..names import check_name

    src = Path(dataset) if Path(dataset).is_dir() else config.datasets_dir() / check_name(dataset, "dataset")
    if not (src / "manifest.json").exists():
        raise FileNotFoundError(f"no dataset {dataset!r} at {src} (`eventatlas datasets` lists them; ingest your text "
                                "with `eventatlas ingest text --path FILES --dataset NAME`)")
    out_name = check_name(name or f"{src.name}_detected", "dataset")
    if config.datasets_dir() / out_name == src.resolve():
        raise ValueError(f"--name {out_name}: the detected mentions would replace the dataset they were found in; "
                         "name a new dataset")
    dev = resolve_device(device)
    return detect_in(src, model, config.datasets_dir() / out_name, name=out_name, device=dev,
                  precision=resolve_precision("auto", dev), threshold=threshold, batch_size=batch_size)


def detect(dataset: str, model: str, name: str | None = None, threshold: float | None = None,
                    device: str = "auto", batch_size: int = 64, *, engine: Engine) -> dict[str, Any]:
    """``{"manifest", "published"}``: the new dataset's manifest and what the publish path did with its record."""
    from ..tracking.records import ingest_record
    from ..tracking.runinfo import utcnow

    started = utcnow().isoformat()
    params = {"detect": dataset, "model": model, "name": name, "threshold": threshold, "device": device}
    manifest = engine.step("detect", detect_step)(dataset, model, name, threshold, device, batch_size)
    published = engine.publish([str(ingest_record(manifest, params, started))])
    return {"manifest": manifest, "published": published}
