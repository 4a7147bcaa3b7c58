"""What the scripts' ``--smoke`` modes share (a helper module, not a script: tests/project/test_scripts_smoke.py runs
every ``scripts/*.py`` and ``benchmarks/*.py`` except names starting with ``_``)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def grounding_dataset(scratch: Path) -> Path:
    """The shipped FrameNet grounding sample, ingested under ``scratch``."""
    from eventatlas.config import samples_dir
    from eventatlas.data.ingest import ingest

    out = Path(scratch) / "framenet_grounding"
    ingest("framenet_grounding", samples_dir() / "framenet_grounding", out_dir=out, dataset="framenet_grounding",
           progress=False)
    return out


def grounding_run(dataset_dir: Path, scratch: Path, variants: list[str], *, cross: bool = False,
                  score: str = "dot") -> Path:
    """A grounding run of a tiny random BERT on ``dataset_dir`` (one epoch; the layout a real run leaves:
    ``VARIANT/model``, ``candidate_vectors.npy``, ``cross/`` with ``cross``); returns its run directory."""
    import pyarrow.parquet as pq

    from eventatlas.run.runner import run_method

    sys.path.insert(0, str(REPO / "tests"))
    from support.tiny_models import tiny_bert  # the tests' tiny model: one definition of it

    texts = pq.read_table(Path(dataset_dir) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
    texts += [f"{r['name']} {r['definition']}" for r in pq.read_table(Path(dataset_dir) / "event_types.parquet").to_pylist()]
    model = tiny_bert(Path(scratch), texts)
    params = {"model_id": str(model), "variants": variants, "cross_encoder": cross, "cross_k": 4, "score": score,
              "max_train_mentions": 16, "max_eval_mentions": 8, "max_cross_train_mentions": 8,
              "train": {"epochs": 1, "batch_size": 8, "precision": "fp32"}, "cross": {"epochs": 1, "batch_size": 8, "precision": "fp32"}}
    return run_method("grounding", dataset_dir, seed=0, params=params, device="cpu", flow="smoke").parent
