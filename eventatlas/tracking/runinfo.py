"""What a run records about itself: code version, device, seeds (and their bounds), run ids."""
from __future__ import annotations

import os
import platform
import random
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from typing import Any

from .. import __version__, config


@lru_cache(maxsize=1)
def code_version() -> str:
    """``git describe --always --dirty`` of the repo (``-dirty`` when the tree has local
    changes); ``pkg-<installed version>`` outside a checkout (an installed wheel). A copy of the checkout
    without its git metadata (a container image, a machine the tree was copied to) records
    ``$EVENTATLAS_CODE_VERSION`` when set, so its runs are found as those of the commit it was copied from."""
    if not config.in_checkout():
        # site-packages may lie inside some other git repository: its commit says nothing about this code
        try:
            return f"pkg-{metadata.version('eventatlas')}"
        except metadata.PackageNotFoundError:
            return f"pkg-{__version__}"
    try:
        out = subprocess.run(
            ["git", "-C", str(config.REPO_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True, text=True, timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return f"{__version__}+g{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("EVENTATLAS_CODE_VERSION") or __version__


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


# the warehouse's seed columns are INTEGER (int32), the narrowest of what records a seed (numpy's legacy seeding
# takes < 2**32, torch and random more): a larger seed would run, then be refused at publish
SEED_LIMIT = 2**31
MAX_SEEDS = 100  # in one plan: a declaration or --seeds


def check_seeds(seeds: Any, option: str = "seeds") -> list[int]:
    """``seeds`` as a list of distinct integers ``0 <= seed <`` :data:`SEED_LIMIT`, at most :data:`MAX_SEEDS` of them;
    else a ValueError naming ``option`` and the value (shortened: a 5000-digit seed is not echoed)."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError(f"{option}: no seed given")
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"{option}: {len(seeds)} seeds, at most {MAX_SEEDS}")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < SEED_LIMIT:
            text = str(s) if len(str(s)) <= 24 else str(s)[:20] + f"... ({len(str(s))} characters)"
            raise ValueError(f"{option}: {text} is not a seed (an integer 0 <= seed < 2**31)")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{option}: a seed repeats ({', '.join(map(str, seeds))})")
    return seeds


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
