"""EMR's loss: :mod:`.siamese` (``y·max(1−S, 0)² + (1−y)·S²``)."""
