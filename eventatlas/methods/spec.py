"""Typed method specifications: config, applicable dataset kinds, GPU need, evaluation tasks.

Every method declares a :class:`MethodSpec`. Its ``config`` is a pydantic model that forbids
unknown keys, so ``--params`` is validated in the CLI (and at the start of a flow) before any
task runs, with an error naming the bad key and the valid ones. ``train-all`` picks the datasets a
method runs on from ``applies_to`` (dataset kinds, :data:`eventatlas.data.KINDS`).
"""
from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Literal, Mapping, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..training.args import TrainingArgs

Precision = Literal["auto", "fp32", "bf16"]


class ParamError(ValueError):
    """``--params`` names an unknown method or key, or a value of the wrong type."""


class MethodConfig(BaseModel):
    """Base of every method's config: unknown keys are errors. ``device`` is where it encodes and trains and
    ``precision`` its autocast precision, both resolved once per run by the method context (``auto``:
    :func:`eventatlas.modeling.device.default_precision`, fp32 on CPU); the resolved values are written here, so they
    are part of the run's configuration. A nested ``precision`` left ``auto`` (an ``encoder`` or ``train``
    block) takes the run's."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    precision: Precision = Field("auto", description="auto | fp32 | bf16 (auto: fp32 on CPU, bf16 on a GPU that has it)")
    save_model: bool = Field(True, description="a trained method saves its model under runs/<run_id>/model "
                                               "(loadable as run:<run_id>); false opts out")

    @model_validator(mode="after")
    def _one_device(self) -> "MethodConfig":
        # a second device in a training block used to be silently replaced by the run's: refuse it instead
        for name in type(self).model_fields:
            block = getattr(self, name)
            if isinstance(block, TrainingArgs) and block.device.strip().lower() not in ("auto", self.device.lower()):
                raise ValueError(f"{name}.device {block.device!r}: a run has one device, set by the method's "
                                 f"'device' key (here {self.device!r})")
        return self


class EncoderConfig(BaseModel):
    """How a frozen encoder embeds mentions (the device is the method's ``device``)."""

    model_config = ConfigDict(extra="forbid")

    precision: Precision = "auto"
    max_length: int = Field(256, ge=8)
    batch_size: int = Field(64, ge=1)


def _training_defaults(defaults: Mapping[str, Any]) -> Callable[[Any], Any]:
    def apply(value: Any) -> Any:
        if isinstance(value, TrainingArgs):
            return value
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            return value  # pydantic reports the type error
        return {**defaults, **value}

    return apply


def _training_minimums(minimums: Mapping[str, int]) -> Callable[[TrainingArgs], TrainingArgs]:
    def check(args: TrainingArgs) -> TrainingArgs:
        for key, low in minimums.items():
            if getattr(args, key) < low:
                raise ValueError(f"{key} must be >= {low} for this method (got {getattr(args, key)})")
        return args

    return check


def training_field(defaults: Mapping[str, Any], minimums: Mapping[str, int] | None = None) -> Any:
    """``(type, default)`` of a config's training block: one :class:`TrainingArgs` whose defaults are the
    method's ``defaults`` (data, not a subclass), the user's keys over them, and ``minimums`` (e.g. a batch
    of 2 for in-batch negatives) checked. Use: ``T, D = training_field({...})`` then ``train: T = D``."""
    d = dict(defaults)
    TrainingArgs(**d)  # a bad defaults dict fails at import, not in a user's run
    typ = Annotated[TrainingArgs, BeforeValidator(_training_defaults(d)),
                    AfterValidator(_training_minimums(dict(minimums or {})))]
    return typ, Field(default_factory=lambda: TrainingArgs(**d))


@dataclass(frozen=True)
class MethodSpec:
    """A method as ``train-all`` sees it. ``run`` is ``run(ctx: MethodContext) -> MethodResult``; the context
    (:mod:`eventatlas.methods.context`) has already checked the dataset kinds against ``applies_to`` and
    merged the dataset's registry protocol (``protocol`` task, under ``protocol_defaults``) into the config."""

    name: str
    config: str  # "module:Class" (imported lazily: validating --params must not import torch)
    run: str  # "module:function" with signature run(ctx: MethodContext) -> MethodResult
    applies_to: frozenset[str]  # dataset kinds it can use
    tasks: tuple[str, ...]  # the `task` values of its metric rows
    gpu: Literal["no", "advised", "required"] = "no"
    description: str = ""
    protocol: Optional[str] = None  # the task whose registry protocol fills unset config keys (protocol_for)
    protocol_defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)  # under the dataset's protocol
    # trains a model (its rows get trained_on = the dataset; it saves the model unless save_model=false)
    trains: bool = True
    # Applying a saved model to another dataset (`eventatlas evaluate`): "module:function" with signature
    # apply(model: SavedModel, ctx: MethodContext) -> MethodResult, run in the context of the method
    # `apply_with` (whose config the apply step takes); None: not applicable that way (`apply_note` says why)
    apply: Optional[str] = "eventatlas.methods.untuned:apply"
    apply_with: str = "untuned"
    apply_note: str = ""

    def config_class(self) -> type[MethodConfig]:
        return _load(self.config)

    def run_function(self) -> Callable[..., Any]:
        """The method's ``run(ctx)``."""
        return _load(self.run)

    def applier(self) -> Callable[..., Any]:
        """The method's ``apply(model, ctx)`` (see ``apply``); a method without one is refused in one line."""
        if self.apply is None:
            raise ParamError(f"{self.name} models cannot be evaluated on another dataset"
                             + (f": {self.apply_note}" if self.apply_note else ""))
        return _load(self.apply)

    def validate(self, params: Mapping[str, Any] | MethodConfig | None) -> MethodConfig:
        cls = self.config_class()
        if isinstance(params, cls):
            return params
        try:
            return cls.model_validate(dict(params or {}))
        except ValidationError as e:
            raise ParamError(format_errors(self.name, cls, e)) from None

    def applies(self, kinds: frozenset[str]) -> bool:
        return bool(self.applies_to & kinds)


def _load(target: str) -> Any:
    mod, name = target.split(":")
    return getattr(importlib.import_module(mod), name)


def _fields(cls: type[BaseModel], path: tuple) -> list[str]:
    """Valid keys at ``path`` inside a (nested) config model."""
    for p in path:
        f = cls.model_fields.get(p)
        ann = f.annotation if f is not None else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        cls = ann
    return sorted(cls.model_fields)


def format_errors(method: str, cls: type[BaseModel], err: ValidationError) -> str:
    """One line per problem: ``--params: untuned: unknown key 'k_sen' (did you mean 'k_seen'?) ...``."""
    lines = []
    for e in err.errors():
        loc = tuple(str(x) for x in e["loc"])
        where = ".".join(loc)
        if e["type"] == "extra_forbidden":
            valid = _fields(cls, loc[:-1])
            close = difflib.get_close_matches(loc[-1], valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            lines.append(f"--params: {method}: unknown key {where!r}{hint}; valid keys"
                         f"{' of ' + '.'.join(loc[:-1]) if loc[:-1] else ''}: {', '.join(valid)}")
        elif not loc:  # a check of the whole config: its message names the keys
            lines.append(f"--params: {method}: {e['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"--params: {method}.{where}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def json_params(config: MethodConfig) -> dict[str, Any]:
    """The explicitly set values of a config as plain JSON (what a flow parameter carries)."""
    return config.model_dump(mode="json", exclude_unset=True)


def merge_defaults(config: MethodConfig, defaults: Mapping[str, Any]) -> MethodConfig:
    """``config`` with ``defaults`` (e.g. a dataset's protocol) filling the fields the user did not set."""
    unset = {k: v for k, v in defaults.items() if k in type(config).model_fields and k not in config.model_fields_set}
    if not unset:
        return config
    merged = {**unset, **config.model_dump(exclude_unset=True)}
    return type(config).model_validate(merged)

