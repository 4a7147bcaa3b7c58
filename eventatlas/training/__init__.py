"""Training core shared by every trained method: typed args, bucketed sampler, the loop, callbacks."""
from .args import TrainingArgs
from .callbacks import Callback, EarlyStopping, EvalCallback
from .loop import Trainer, TrainResult, TrainTask
from .sampler import BucketBatchSampler, padding_fraction, shard

__all__ = ["BucketBatchSampler", "Callback", "EarlyStopping", "EvalCallback", "TrainResult", "TrainTask", "Trainer",
           "TrainingArgs", "padding_fraction", "shard"]
