"""Shared test fixtures. Each test gets its own data dir, warehouse and PREFECT_HOME."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# The suite sees the environment CI gives it, not the developer's shell: an exported EVENTATLAS_CACHE
# (a shared cache holding someone else's token ids and CPU precision-timing probe), EVENTATLAS_DATA /
# EVENTATLAS_WAREHOUSE (real data for the tests that do not isolate their own), a tuning knob
# (EVENTATLAS_MAX_DENSE_N, EVENTATLAS_LOCK_TIMEOUT, ...) or a live PREFECT_API_URL would otherwise change
# what a test sees or where it writes. Kept: the tests' own knobs and the path to ../shared/data.
_KEEP = {"EVENTATLAS_SHARED_DATA", "EVENTATLAS_FUZZ_EXAMPLES", "EVENTATLAS_TEST_ARTIFACTS"}
for _k in [k for k in os.environ if k.startswith("EVENTATLAS_") and k not in _KEEP] + ["PREFECT_API_URL"]:
    os.environ.pop(_k, None)

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from eventatlas.config import shared_data  # noqa: E402

SHARED = shared_data()


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data; skips the test with a clear reason when absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not available: {p} is absent (../shared/data is only present in the dev/CI workspace)")
    return p


@pytest.fixture
def eventatlas_env(tmp_path, monkeypatch):
    """Isolated data root and warehouse for one test."""
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    return tmp_path


@pytest.fixture(autouse=True, scope="session")
def _reject_reasons_are_declared():
    """Every reject a test makes a reader or builder write uses a reason from ``eventatlas.reasons`` (the
    reasons computed at run time included, which the source scan in test_reject_reasons.py cannot see)."""
    from eventatlas import io
    from eventatlas.reasons import REJECT_REASONS

    original = io.Rejects.add

    def add(self, source, location, reason, *args, **kwargs):
        assert reason in REJECT_REASONS, f"reject reason {reason!r} is not declared in eventatlas/reasons.py"
        return original(self, source, location, reason, *args, **kwargs)

    io.Rejects.add = add
    yield
    io.Rejects.add = original
