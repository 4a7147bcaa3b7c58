"""Training core shared by every trained method: typed args, bucketed sampler, the loop, callbacks.

``TrainingArgs`` imports without torch (method configs are validated before any model code loads); the
loop, callbacks and sampler are imported on first use."""
from .args import TrainingArgs

_LAZY = {"Callback": "callbacks", "EarlyStopping": "callbacks", "EvalCallback": "callbacks", "Trainer": "loop",
         "TrainResult": "loop", "TrainTask": "loop", "BucketBatchSampler": "sampler", "padding_fraction": "sampler",
         "shard": "sampler"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BucketBatchSampler", "Callback", "EarlyStopping", "EvalCallback", "TrainResult", "TrainTask", "Trainer",
           "TrainingArgs", "padding_fraction", "shard"]
