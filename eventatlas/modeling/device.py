"""Where a model runs and in which precision: one answer for every encoder and trainer.

``resolve_device("auto" | "cpu" | "cuda" | "cuda:N")`` returns a concrete device string or refuses
an unavailable one with :class:`DeviceUnavailable` *before* any work is done. A run resolves its device
once (:class:`eventatlas.methods.context.MethodContext`); the encoders and the trainer take that
concrete device as it is (:func:`ensure_device` resolves only ``auto``, for callers outside a run).

``resolve_precision`` picks ``bf16`` or ``fp32`` for autocast. ``auto`` is a fixed rule of the device,
never a measurement: **fp32 on every CPU, bf16 on a CUDA GPU that supports it** (fp32 on one that does
not). Why: results differ between bf16 and fp32 (cosines round to ~3 digits), so a precision chosen by
a timing probe made the same command give different numbers on two machines, or on one machine under
different load (OntoEvent ARI 48.5 vs 48.7 on CPU). On CPUs bf16 speed depends on the instruction set
(AMX roughly halves encoder time; with only AVX512-BF16 it was 0.92x of fp32 for the encoder while a
bare Linear was 1.2x faster), so no fixed rule would be fast everywhere: fp32 is the one that gives the
same numbers everywhere. On CUDA, bf16 support is a property of the GPU model and bf16 is native and
much faster there. The CPU timing probe (real attention + MLP layers of the model's shape) is kept as
*advice*: ``python -m eventatlas.modeling.device`` measures it (cached), :func:`advise_precision` then logs once
per process that bf16 would be faster, and a user who wants it sets ``precision: bf16``, which is then part
of the run's configuration.
Probe results are cached per (CPU, torch, threads, shape, mode) under ``cache_dir()/probes``.
"""
from __future__ import annotations

import contextlib
import json
import logging
import platform
import time
from typing import Any, Iterator

from .. import config

log = logging.getLogger(__name__)

DEVICES_HELP = "auto | cpu | cuda | cuda:N"
PRECISIONS = ("auto", "fp32", "bf16")
PROBE_FORMAT = 1
# bf16 must beat fp32 by this factor to be chosen: a marginal win is within timing noise and bf16
# costs accuracy, so ties go to fp32.
PROBE_MARGIN = 0.9


class DeviceUnavailable(ValueError):
    """The requested device does not exist on this machine (message says what does)."""


def cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(device: str | None = "auto") -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``cuda[:N]`` is checked to exist."""
    d = (device or "auto").strip().lower()
    if d == "auto":
        return "cuda" if cuda_count() else "cpu"
    if d == "cpu":
        return "cpu"
    if d == "cuda" or d.startswith("cuda:"):
        n = cuda_count()
        if not n:
            raise DeviceUnavailable(
                f"device {device!r} requested but no CUDA GPU is visible to torch here "
                f"(torch.cuda.is_available() is False: a CPU build of torch, or no GPU); use --device cpu or auto")
        if d != "cuda":
            idx = d.split(":", 1)[1]
            if not idx.isdigit() or int(idx) >= n:
                raise DeviceUnavailable(f"device {device!r} does not exist: {n} CUDA device(s), cuda:0..cuda:{n - 1}")
        return d
    raise DeviceUnavailable(f"unknown device {device!r}; use {DEVICES_HELP}")


def describe(device: str) -> str:
    """What a run records as its device: the GPU's name, or the CPU model and thread count."""
    import torch

    if device.startswith("cuda"):
        idx = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return f"{device} ({torch.cuda.get_device_name(idx)})"
    return f"cpu ({cpu_name()}, {torch.get_num_threads()} threads)"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def autocast(device: str, precision: str):
    """``torch.autocast`` in bf16 when ``precision == "bf16"``, otherwise a no-op context."""
    import torch

    if precision == "bf16":
        return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)
    return contextlib.nullcontext()


def without_autocast(t):
    """Context in which ``t``'s device runs without autocast (fp32), inside an enclosing bf16 one.

    The training core runs forward passes under bf16 autocast where it measured that faster; autocast
    recasts even explicit ``.float()`` inputs of a matmul to bf16, which rounds cosines to ~3 digits
    (ArcFace's scale 64 turns that into ~2% of the loss). Loss heads leave it; the encoder keeps bf16."""
    import torch

    return torch.autocast(device_type=t.device.type, enabled=False)


def default_precision(device: str) -> str:
    """What ``auto`` means on ``device``: bf16 on a CUDA GPU with bf16 support, else fp32 (module doc)."""
    if device.startswith("cuda"):
        import torch

        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "fp32"


def resolve_precision(precision: str | None, device: str, *, shape: dict[str, int] | None = None,
                      mode: str = "inference") -> str:
    """``fp32`` or ``bf16``: an explicit value as given, ``auto`` by :func:`default_precision` (the same on
    every machine with this device). ``shape`` / ``mode`` only size the advisory CPU probe."""
    p = (precision or "auto").lower()
    if p not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if p != "auto":
        return p
    out = default_precision(device)
    if out == "fp32" and not device.startswith("cuda"):
        advise_precision(shape or {}, mode)
    return out


_ADVISED: set[str] = set()


def advise_precision(shape: dict[str, int], mode: str = "inference") -> bool:
    """Log, once per process and probe key, when this machine's timing probe found bf16 faster. Advice
    only: the precision of a run never depends on it. It reads a probe already measured (cached by
    :func:`cpu_bf16_faster`: ``python -m eventatlas.modeling.device``, or the training benchmark); a run never pays
    for a probe."""
    key = _probe_key(shape, mode)
    if key in _ADVISED:
        return False
    _ADVISED.add(key)
    res = _PROBES.get(key) or _read_json(config.cache_dir() / "probes" / "precision.json").get(key)
    if res and res.get("bf16_faster"):
        log.info("precision advice (%s, %s): bf16 autocast measured faster here (fp32 %.1f ms, bf16 %.1f ms); "
                 "runs stay fp32 unless you set precision bf16 (a different configuration, slightly different "
                 "numbers)", mode, cpu_name(), res["fp32_ms"], res["bf16_ms"])
        return True
    return False


def ensure_device(device: str | None) -> str:
    """A device a run already resolved (``cpu``, ``cuda``, ``cuda:N``) as it is; ``auto`` / None (a caller
    outside a run: a test, a benchmark) resolved here."""
    d = (device or "auto").strip().lower()
    if d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit()):
        return d
    return resolve_device(device)


def _probe_key(shape: dict[str, int], mode: str) -> str:
    import torch

    s = {k: int(shape.get(k, v)) for k, v in (("hidden", 384), ("heads", 12), ("intermediate", 1536))}
    return json.dumps({"cpu": cpu_name(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                       "mode": mode, "format": PROBE_FORMAT, **s}, sort_keys=True)


_PROBES: dict[str, dict[str, Any]] = {}


def cpu_bf16_faster(shape: dict[str, int], mode: str = "inference") -> bool:
    """Time 2 transformer layers of the model's width in fp32 and under bf16 autocast (cached)."""
    key = _probe_key(shape, mode)
    if key in _PROBES:
        return _PROBES[key]["bf16_faster"]
    path = config.cache_dir() / "probes" / "precision.json"
    cached = _read_json(path)
    if key in cached:
        _PROBES[key] = cached[key]
        return cached[key]["bf16_faster"]
    res = _probe(json.loads(key), mode)
    _PROBES[key] = res
    with contextlib.suppress(OSError):  # a read-only cache only costs a re-probe next time
        from ..io import atomic_write_json

        atomic_write_json(path, {**_read_json(path), key: res})
    log.info("precision probe (%s, %s): fp32 %.1f ms, bf16 %.1f ms (bf16 %s)", mode, cpu_name(), res["fp32_ms"],
             res["bf16_ms"], "faster" if res["bf16_faster"] else "not faster")
    return res["bf16_faster"]


def _read_json(path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _probe(s: dict[str, Any], mode: str, reps: int = 3) -> dict[str, Any]:
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=512, hidden_size=s["hidden"], num_hidden_layers=2, num_attention_heads=s["heads"],
                     intermediate_size=s["intermediate"], max_position_embeddings=128)
    with _torch_seed(0):
        model = BertModel(cfg)
        ids = torch.randint(5, 512, (32, 48))
    mask = torch.ones_like(ids)
    if mode == "inference":
        model.eval()

    def step(prec: str) -> float:
        t0 = time.perf_counter()
        ctx = torch.inference_mode() if mode == "inference" else contextlib.nullcontext()
        with ctx, autocast("cpu", prec):
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state
            if mode != "inference":
                out.float().pow(2).mean().backward()
        return time.perf_counter() - t0

    times: dict[str, float] = {}
    for prec in ("fp32", "bf16"):
        step(prec)  # warm-up: oneDNN builds its kernels on first use
        times[prec] = min(step(prec) for _ in range(reps))
    return {"fp32_ms": 1000 * times["fp32"], "bf16_ms": 1000 * times["bf16"],
            "bf16_faster": times["bf16"] < PROBE_MARGIN * times["fp32"]}


@contextlib.contextmanager
def _torch_seed(seed: int) -> Iterator[None]:
    """Seed torch for the probe without disturbing the caller's RNG stream."""
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def set_threads(n: int | None) -> None:
    """Pin torch's intra-op threads (two runs sharing cores must not oversubscribe them)."""
    if n:
        import torch

        torch.set_num_threads(int(n))


if __name__ == "__main__":  # measure (and cache) this CPU's bf16 probe: python -m eventatlas.modeling.device
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for m in ("inference", "train"):
        cpu_bf16_faster({}, m)
