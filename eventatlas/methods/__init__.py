"""Methods runnable by ``train-all``, each declared by a :class:`MethodSpec` (typed config, dataset
kinds, GPU need, evaluation tasks). Specs name their config and run function lazily, so validating
``--params`` imports neither torch nor the method's code."""
from __future__ import annotations

from typing import Any, Mapping

from .spec import MethodConfig, MethodSpec, ParamError

# A method is ``run(ctx)`` (eventatlas.methods.context.MethodContext); see spec.MethodSpec.

SPECS: dict[str, MethodSpec] = {
    "untuned": MethodSpec(
        name="untuned", config="eventatlas.methods.untuned:UntunedConfig", run="eventatlas.methods.untuned:run",
        applies_to=frozenset({"typed_mentions", "event_pairs"}), tasks=("induction", "similarity"), protocol="induction",
        trains=False, description="frozen encoder: cluster unseen types' mentions; score event-pair similarity"),
    "batch_attention": MethodSpec(
        name="batch_attention", config="eventatlas.methods.batch_attention:BatchAttentionConfig",
        run="eventatlas.methods.batch_attention:run", applies_to=frozenset({"typed_mentions"}),
        tasks=("induction", "naming", "linking", "training"), gpu="advised", protocol="induction",
        apply="eventatlas.methods.batch_attention:apply", apply_with="batch_attention",
        description="batch-attention type induction (Edwards & Ji 2023): train on seen types, cluster unseen"),
    "emr": MethodSpec(
        name="emr", config="eventatlas.methods.emr:EMRConfig", run="eventatlas.methods.emr:run",
        applies_to=frozenset({"typed_mentions"}), tasks=("retrieval",), gpu="advised", protocol="retrieval",
        apply="eventatlas.methods.emr:apply", apply_with="emr",
        # the paper's episode sizes, under a dataset's own protocol
        protocol_defaults={"min_mentions": 100, "n_corpus": 50, "n_query": 10, "n_dev": 40, "n_none": 2000},
        description="few-shot event mention retrieval: k-shot m-way MAP of ad-hoc vs per-query Siamese rankers"),
    "frame_dml": MethodSpec(
        name="frame_dml", config="eventatlas.methods.frame_dml:FrameDMLConfig", run="eventatlas.methods.frame_dml:run",
        applies_to=frozenset({"typed_mentions"}), tasks=("induction", "retrieval", "training"), gpu="advised",
        protocol="induction", apply="eventatlas.methods.frame_dml:apply", apply_with="frame_dml",
        description="supervised frame induction with deep metric learning (Yamada et al. 2023): fine-tune on "
                    "training verbs' frames, cluster unseen verbs' instances (3-fold verb cross-validation)"),
    "swcc": MethodSpec(
        name="swcc", config="eventatlas.methods.swcc:SWCCConfig", run="eventatlas.methods.swcc:run",
        applies_to=frozenset({"event_cooccurrence"}), tasks=("similarity", "training"), gpu="advised",
        description="SWCC event representations (Gao et al. 2022): weakly supervised multi-positive InfoNCE + "
                    "prototypes + MLM on event co-occurrence; scored on hard similarity, transitive, MCNC"),
    "grounding": MethodSpec(
        name="grounding", config="eventatlas.methods.grounding:GroundingConfig", run="eventatlas.methods.grounding:run",
        applies_to=frozenset({"grounding"}), tasks=("grounding",), gpu="advised", protocol="grounding", apply=None,
        apply_note="a grounding model is tied to its dataset's candidate events; apply it to new text with "
                   "`eventatlas ground`, or load its bi-encoder (run:<id>) in another method",
        description="hierarchical event grounding (Ou et al. 2023): bi-encoder variants (BLINK, multi-label, HP, HJL), "
                    "cross-encoder with a dev-tuned threshold, hierarchy discovery"),
    "event_detection": MethodSpec(
        name="event_detection", config="eventatlas.methods.event_detection:EventDetectionConfig",
        run="eventatlas.methods.event_detection:run", applies_to=frozenset({"typed_mentions"}),
        tasks=("detection", "training"), gpu="advised", protocol="detection",
        apply="eventatlas.methods.event_detection:apply", apply_with="event_detection",
        description="event detection: a token-level trigger identifier and typer on the shared encoder, with the "
                    "lexical baseline; scored by strict trigger identification / classification P/R/F1"),
    "discover": MethodSpec(
        name="discover", config="eventatlas.methods.discover:DiscoverMethodConfig",
        run="eventatlas.methods.discover:run", applies_to=frozenset({"typed_mentions"}),
        tasks=("detection", "induction", "naming", "discovery"), gpu="advised", protocol="detection", trains=False,
        apply=None, apply_note="discover applies a saved detector itself: `--params '{\"discover\": "
                               "{\"detector\": \"run:<id>\"}}'`",
        description="discover scored: detect mentions (gold, lexical, a saved detector), induce, name and link "
                    "types without reading the gold, then score detection, clustering, naming and new types"),
}
REGISTRY = SPECS  # name -> spec


def get_spec(name: str) -> MethodSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise ParamError(f"unknown method {name!r}; known: {', '.join(sorted(SPECS))}") from None


def validate_params(params: Mapping[str, Any] | None, methods: list[str] | None = None) -> dict[str, MethodConfig]:
    """Validate ``{method: {key: value}}`` for every named method (and each method in ``methods``);
    raises :class:`ParamError` listing every problem, before anything runs."""
    params = dict(params or {})
    if not isinstance(params, dict) or any(not isinstance(v, dict) for v in params.values()):
        raise ParamError('--params must be a JSON object {method: {key: value}}, e.g. {"untuned": {"k_seen": 10}}')
    errors, out = [], {}
    for name in list(dict.fromkeys([*(methods or []), *params])):
        try:
            out[name] = get_spec(name).validate(params.get(name))
        except ParamError as e:
            errors.append(str(e))
    for name in params:
        if methods is not None and name not in methods and name in SPECS:
            errors.append(f"--params: parameters given for {name!r}, which is not among the methods run ({methods})")
    if errors:
        raise ParamError("\n".join(errors))
    return out


__all__ = ["MethodConfig", "MethodSpec", "ParamError", "REGISTRY", "SPECS", "get_spec", "validate_params"]
