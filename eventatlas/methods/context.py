"""The method context: what a method run needs, built once by the runner.

A method is ``run(ctx: MethodContext) -> MethodResult`` and does only its own protocol. Before it runs,
:func:`resolve_config` and :func:`build_context` have

* validated the typed config (``--params``) and merged the dataset's registry protocol into the keys the
  user left unset (``spec.protocol`` task, under ``spec.protocol_defaults``);
* resolved the device **once** (the method's own ``device`` if the user set it, else the flow's
  ``--device``; an unavailable one is refused in one line) and the precision (``auto`` is a fixed rule of
  the device, :func:`eventatlas.modeling.device.default_precision`), and written both into the config, so they are
  part of the run's configuration identity (its run id prefix and its record); a training block (any
  :class:`~eventatlas.training.TrainingArgs` field) gets the run's device, and every nested ``precision``
  left ``auto`` gets the run's precision, so ``Trainer(..., ctx.config.train, ...)`` needs nothing more;
* read the manifest (``ctx.manifest``, its tables through :meth:`MethodContext.table`), checked the
  dataset kinds against ``spec.applies_to`` (:class:`NotApplicable` otherwise), seeded the RNGs, and made
  the run directory.

Where a method keeps its trained model: ``ctx.model_dir`` (``<run_dir>/model/``). Convention: a method that
keeps one model writes it there; one that keeps several writes one sub-folder each
(``model/<variant>/``); each is a directory the model's loader reads as a whole (no other files of the
run are needed to load it). The save/load format itself is defined by the model layer, not here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .spec import MethodConfig, MethodSpec, ParamError, merge_defaults

if TYPE_CHECKING:
    import pyarrow as pa

    from ..data import Manifest
    from .base import MethodResult


@dataclass
class MethodContext:
    spec: MethodSpec
    config: Any  # the method's MethodConfig: validated, protocol-merged, device/precision resolved
    manifest: "Manifest"
    run_dir: Path
    seed: int = 0
    resume: bool = False
    protocol: dict[str, Any] = field(default_factory=dict)  # the dataset's registry protocol for this method
    record: dict[str, Any] | None = None  # the run record the runner fills (None outside a recorded run)

    @property
    def method(self) -> str:
        return self.spec.name

    @property
    def device(self) -> str:
        """The concrete device (cpu | cuda | cuda:N), resolved once for the run."""
        return self.config.device

    @property
    def precision(self) -> str:
        """fp32 | bf16, resolved once for the run (nested blocks may override it explicitly)."""
        return self.config.precision

    @property
    def dataset(self) -> str:
        return self.manifest.dataset

    @property
    def dataset_dir(self) -> Path:
        return self.manifest.path

    @property
    def model_dir(self) -> Path:
        """Where the run keeps its trained model(s): ``<run_dir>/model/`` (see the module doc)."""
        return self.run_dir / "model"

    @cached_property
    def device_desc(self) -> str:
        """What the run records as its device (GPU name, or CPU model and threads)."""
        from ..modeling.device import describe

        return describe(self.device)

    def result(self) -> "MethodResult":
        """An empty result on this run's device."""
        from .base import MethodResult

        return MethodResult(device=self.device_desc)

    def table(self, name: str, columns: list[str] | None = None) -> "pa.Table":
        """One of the dataset's tables (``mentions``, ``event_pairs``, ``event_types``, ...)."""
        return self.manifest.read_table(name, columns=columns)

    def base_params(self, **extra: Any) -> dict[str, Any]:
        """The run-record params every method starts from: method, dataset, seed, config, device, precision."""
        return {"method": self.method, "dataset": self.dataset, "seed": self.seed,
                "config": self.config.model_dump(mode="json"), "device": self.device_desc,
                "precision": self.precision, **extra}


def resolve_config(spec: MethodSpec, params: Mapping[str, Any] | MethodConfig | None, *, device: str | None = None,
                   manifest: "Manifest | None" = None) -> MethodConfig:
    """The run's config: validated, protocol-merged (when ``manifest`` is given), with the device resolved
    once (the config's own ``device`` if the user set it, else ``device``, the flow's) and the precision
    resolved, both written into the config and its training / encoder blocks. Raises :class:`ParamError`
    (bad params) or :class:`eventatlas.modeling.device.DeviceUnavailable` (one line each) before any work."""
    from ..modeling.device import resolve_device, resolve_precision
    from ..training.args import TrainingArgs

    cfg = spec.validate(params)
    if manifest is not None:
        cfg = merge_defaults(cfg, protocol_defaults(spec, manifest))
    wanted = cfg.device if ("device" in cfg.model_fields_set or device is None) else device
    dev = resolve_device(wanted)  # the run's one resolution
    prec = resolve_precision(cfg.precision, dev)
    update: dict[str, Any] = {"device": dev, "precision": prec}
    for name in type(cfg).model_fields:
        block = getattr(cfg, name)
        if not isinstance(block, TrainingArgs) and not (hasattr(block, "model_fields") and
                                                         "precision" in type(block).model_fields):
            continue
        sub: dict[str, Any] = {}
        if isinstance(block, TrainingArgs):
            given = block.device.strip().lower()
            if "device" in block.model_fields_set and given not in ("auto", dev):
                raise ParamError(f"--params: {spec.name}.{name}.device: {block.device!r} differs from the run's device "
                                 f"{dev!r}; a run has one device: set {spec.name}'s 'device'")
            sub["device"] = dev
        if getattr(block, "precision", None) == "auto":
            sub["precision"] = prec
        if sub:
            update[name] = block.model_copy(update=sub)
    return cfg.model_copy(update=update)


def protocol_defaults(spec: MethodSpec, manifest: "Manifest") -> dict[str, Any]:
    """The dataset's registry protocol for the method (over the spec's own protocol defaults)."""
    from ..data import protocol_for

    out = dict(spec.protocol_defaults)
    if spec.protocol:
        out.update(protocol_for(manifest, spec.name, spec.protocol))
    return out


def build_context(spec: MethodSpec, config: MethodConfig, manifest: "Manifest", run_dir: str | Path, *, seed: int = 0,
                  resume: bool = False, record: dict[str, Any] | None = None) -> MethodContext:
    """The context of a run whose config :func:`resolve_config` made; checks the dataset kinds, seeds the
    RNGs and makes the run directory."""
    from ..data import KINDS, NotApplicable
    from ..tracking.runinfo import set_seeds

    kinds = manifest.kinds()
    if not spec.applies(kinds):
        wants = "; or ".join(f"{k} ({KINDS.get(k, '?')})" for k in sorted(spec.applies_to))
        raise NotApplicable(f"{manifest.path}: {spec.name} applies to {wants} datasets; kinds here: "
                            f"{', '.join(sorted(kinds)) or 'none'}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    set_seeds(seed)
    return MethodContext(spec=spec, config=config, manifest=manifest, run_dir=run_dir, seed=seed, resume=resume,
                         protocol=protocol_defaults(spec, manifest), record=record)


def run_in_dir(spec: MethodSpec, dataset_dir: str | Path, out_dir: str | Path, *, seed: int = 0,
               config: Mapping[str, Any] | MethodConfig | None = None, resume: bool = False,
               device: str | None = None) -> "MethodResult":
    """Run a method in ``out_dir`` without a run record (tests, scripts): resolve, build, run."""
    from ..data import Manifest

    man = Manifest.read(dataset_dir)
    cfg = resolve_config(spec, config, device=device, manifest=man)
    ctx = build_context(spec, cfg, man, out_dir, seed=seed, resume=resume)
    return spec.run_function()(ctx)


def method_runner(spec: MethodSpec) -> Callable[..., Any]:
    """``f(dataset_dir, out_dir, *, seed=0, config=None, resume=False, device=None, **params)``: build the
    context and run ``spec``'s method in ``out_dir`` without a run record (tests, scripts; ``train-all`` and
    ``eventatlas train`` go through :func:`eventatlas.run.runner.run_method`)."""

    def run(dataset_dir: Any, out_dir: Any, *, seed: int = 0, config: Any = None, resume: bool = False,
            device: str | None = None, **params: Any) -> Any:
        return run_in_dir(spec, dataset_dir, out_dir, seed=seed, config=config if config is not None else params,
                          resume=resume, device=device)

    return run
