"""Typed method specifications: config, applicable dataset kinds, GPU need, evaluation tasks.

Every method declares a :class:`MethodSpec`. Its ``config`` is a pydantic model that forbids
unknown keys, so ``--params`` is validated in the CLI (and at the start of a flow) before any
task runs, with an error naming the bad key and the valid ones. ``train-all`` picks the datasets a
method runs on from ``applies_to`` (dataset kinds, :data:`eventatlas.data.KINDS`).
"""
from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ParamError(ValueError):
    """``--params`` names an unknown method or key, or a value of the wrong type."""


class MethodConfig(BaseModel):
    """Base of every method's config: unknown keys are errors; ``device`` is where it encodes/trains."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    save_model: bool = Field(True, description="a trained method saves its model under runs/<run_id>/model "
                                               "(loadable as run:<run_id>); false opts out")


class EncoderConfig(BaseModel):
    """How a frozen encoder embeds mentions (the device is the method's ``device``)."""

    model_config = ConfigDict(extra="forbid")

    precision: Literal["auto", "fp32", "bf16"] = "auto"
    max_length: int = Field(256, ge=8)
    batch_size: int = Field(64, ge=1)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    config: str  # "module:Class" (imported lazily: validating --params must not import torch)
    run: str  # "module:function" with signature run(dataset_dir, out_dir, *, seed, config) -> MethodResult
    applies_to: frozenset[str]  # dataset kinds it can use
    tasks: tuple[str, ...]  # the `task` values of its metric rows
    gpu: Literal["no", "advised", "required"] = "no"
    description: str = ""
    # trains a model (its rows get trained_on = the dataset; it saves the model unless save_model=false)
    trains: bool = True
    # "module:function" applying a saved model to another dataset (``eventatlas evaluate``):
    # apply(saved_model, dataset_dir, out_dir, *, seed, config, device) -> MethodResult, ``config`` of
    # the type of ``apply_config`` ("module:Class"); None: the method's models are not applied that way
    apply: str | None = "eventatlas.methods.untuned:apply"
    apply_config: str | None = "eventatlas.methods.untuned:UntunedConfig"
    apply_note: str = ""  # why not, when apply is None

    def config_class(self) -> type[MethodConfig]:
        return _load(self.config)

    def runner(self) -> Callable[..., Any]:
        return _load(self.run)

    def applier(self) -> tuple[Callable[..., Any], type[BaseModel]]:
        if self.apply is None or self.apply_config is None:
            raise ParamError(f"{self.name} models cannot be evaluated on another dataset"
                             + (f": {self.apply_note}" if self.apply_note else ""))
        return _load(self.apply), _load(self.apply_config)

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

