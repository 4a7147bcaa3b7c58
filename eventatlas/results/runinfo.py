"""What a run records about itself: code version, device, seeds, run ids."""
from __future__ import annotations

import os
import platform
import random
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from functools import lru_cache

from .. import __version__, config


@lru_cache(maxsize=1)
def code_version() -> str:
    """``git describe --always --dirty`` of the repo (``-dirty`` when the tree has local
    changes); the package version when there is no git checkout (an installed wheel)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(config.REPO_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True, text=True, timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return f"{__version__}+g{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__


def device_info(import_torch: bool = True) -> str:
    """A short human-readable description of where the run computes. ``import_torch=False``: a run
    that never loaded torch (an ingest) is described without importing it (seconds at start-up)."""
    if not import_torch and "torch" not in sys.modules:
        return f"cpu:{platform.processor() or platform.machine()} ({os.cpu_count()} threads)"
    try:
        import torch

        if torch.cuda.is_available():
            return f"cuda:{torch.cuda.get_device_name(0)}"
        threads = torch.get_num_threads()
    except Exception:  # torch missing or broken: still record the CPU
        threads = os.cpu_count()
    cpu = platform.processor() or platform.machine()
    return f"cpu:{cpu} ({threads} threads)"


def set_seeds(seed: int) -> int:
    """Seed python, numpy and torch (when importable); returns the seed for recording."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass
    return seed


def new_run_id(prefix: str = "run") -> str:
    """Sortable, unique: UTC timestamp + random suffix."""
    ts = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{prefix}-{ts}-{uuid.uuid4().hex[:8]}"


def utcnow() -> datetime:
    """Naive UTC timestamp (DuckDB TIMESTAMP has no zone)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)
