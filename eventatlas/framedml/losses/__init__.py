"""frame_dml's losses, one a module: :mod:`.contrastive`, :mod:`.triplet`, :mod:`.arcface` (through
pytorch-metric-learning), :mod:`.softmax`, :mod:`.adacos` (by hand). Naming rule of every family:
``<family>/losses/<name>.py``, one loss per file, each with its hand-computed test."""
