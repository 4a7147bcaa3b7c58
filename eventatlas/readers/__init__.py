"""Dataset readers: ``REGISTRY[name]`` is the module path of a reader exposing
``read(path, *, dataset=<default>, rejects, **opts)`` and ``DEFAULT_DATASET``."""
from __future__ import annotations

import importlib
from types import ModuleType

REGISTRY: dict[str, str] = {
    "ace2005": "eventatlas.readers.ace2005",
    "maven": "eventatlas.readers.maven",
    "maven_fewshot": "eventatlas.readers.maven_fewshot",
    "maven_sentences": "eventatlas.readers.maven_sentences",
    "framenet": "eventatlas.readers.framenet",
    "framenet_jsonl": "eventatlas.readers.framenet_jsonl",
    "framenet_grounding": "eventatlas.readers.framenet_grounding",
    "ontoevent": "eventatlas.readers.ontoevent",
    "wikievents": "eventatlas.readers.wikievents",
    "hard_similarity": "eventatlas.readers.hard_similarity",
    "transitive_similarity": "eventatlas.readers.transitive_similarity",
    "mcnc": "eventatlas.readers.mcnc",
    "event_tuples": "eventatlas.readers.event_tuples",
    "textee": "eventatlas.readers.textee",
    "textee_ace05": "eventatlas.readers.textee_ace05",
    "textee_maven": "eventatlas.readers.textee_maven",
    "textee_wikievents": "eventatlas.readers.textee_wikievents",
}


def get_reader(name: str) -> ModuleType:
    """The reader module registered as ``name`` (clear error listing the known names)."""
    try:
        return importlib.import_module(REGISTRY[name])
    except KeyError:
        raise KeyError(f"unknown reader {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
