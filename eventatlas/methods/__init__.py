"""Model families runnable by ``train-all``: name -> "module:function".

Each function has the signature
``run(dataset_dir: Path, out_dir: Path, *, seed: int, **params) -> MethodResult``
(see ``eventatlas.methods.base``). Lazy dotted paths keep imports cheap and let
each method live in its own module.
"""
from __future__ import annotations

import importlib
from typing import Callable

REGISTRY: dict[str, str] = {
    "untuned": "eventatlas.methods.untuned:run",
    "batch_attention": "eventatlas.induction.method:run",
}


def get_method(name: str) -> Callable:
    try:
        target = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; known: {sorted(REGISTRY)}") from None
    mod, fn = target.split(":")
    return getattr(importlib.import_module(mod), fn)
