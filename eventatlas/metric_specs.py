"""One declaration per metric: the tasks that write it, which way is better, how it is shown.

:data:`METRIC_SPECS` is the only place a metric's identity lives. Everything else derives from it:

* ``base.DEFAULT_METRICS`` (the metrics shown first per task: leaderboard, report, a run's metric bars),
* the display scale (:func:`scale`: fractions x100, counts / ranks / epochs as they are) used by the
  leaderboard, the HTML report, the plots and the experiment tables,
* the run summary's columns (:func:`headline_metrics`, the publish task's metrics table),
* the warehouse's ``metric_direction`` table, which ``Warehouse.migrate`` brings in line with
  :func:`direction_rows` (the SQL ``leaderboard`` view takes each metric's "best" from it).

Adding a metric is one entry in :data:`METRIC_SPECS`. A name may hold ``{k}`` for a cut-off
(``recall@{k}`` stands for recall@1, recall@10, ...); an exact entry wins over such a family and must
agree with it. A family is always higher-is-better: the warehouse joins directions by exact name, and
the views read a missing row as higher-is-better.

A metric with no spec is shown as a fraction, higher is better (what the leaderboard always did), and
:func:`eventatlas.evaluation.base.metric_rows` logs it once; the tests walk every evaluator's output
and fail on such a name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MetricSpec", "METRIC_SPECS", "spec_for", "is_fraction", "higher_is_better", "scale",
           "default_metrics", "headline_metrics", "direction_rows"]

_K = "{k}"


@dataclass(frozen=True)
class MetricSpec:
    """``name``: the metric (``{k}``: any cut-off >= 1). ``tasks``: the tasks whose rows carry it.
    ``higher_is_better``: the leaderboard's best is the maximum (else the minimum).
    ``fraction``: a value in [0, 1] (ARI and correlations: [-1, 1]) shown x100; False: a count, rank,
    epoch or duration shown as it is (not a score: no best unless lower is better).
    ``default``: position among the task's metrics shown first (``base.DEFAULT_METRICS``), 0 first.
    ``headline``: column position in the run summary table (induction rows), 0 first."""
    name: str
    tasks: tuple[str, ...]
    higher_is_better: bool = True
    fraction: bool = True
    default: int | None = None
    headline: int | None = None

    @property
    def is_family(self) -> bool:
        return _K in self.name

    def matches(self, metric: str) -> bool:
        return _pattern(self.name).fullmatch(metric) is not None if self.is_family else metric == self.name


def _spec(name: str, *tasks: str, lower: bool = False, count: bool = False, default: int | None = None,
          headline: int | None = None) -> MetricSpec:
    return MetricSpec(name, tuple(tasks), higher_is_better=not lower, fraction=not count, default=default,
                      headline=headline)


IND, NAM, LNK, SIM, RET, GRD, TRN, ATL, DET, DIS = ("induction", "naming", "linking", "similarity", "retrieval",
                                                    "grounding", "training", "atlas", "detection", "discovery")
METRIC_SPECS: tuple[MetricSpec, ...] = (
    # clustering (eventatlas.evaluation.metrics.clustering_scores; frame clustering keeps a subset)
    _spec("ari", IND, default=0, headline=0),
    _spec("nmi", IND, default=2, headline=1),
    _spec("nmi_arithmetic", IND),
    _spec("fmi", IND, headline=4),
    _spec("homogeneity", IND),
    _spec("completeness", IND),
    _spec("v_measure", IND, headline=5),
    _spec("bcubed_p", IND),
    _spec("bcubed_r", IND),
    _spec("bcubed_f", IND, default=1, headline=2),
    _spec("purity", IND),
    _spec("inverse_purity", IND),
    _spec("purity_f", IND, headline=3),
    _spec("avg_cluster_purity", IND, NAM),
    _spec("type_representation", IND, NAM),
    _spec("n_clusters", IND, ATL, count=True),
    _spec("n_frames", IND, count=True),
    _spec("mean_rank", IND, lower=True, count=True),  # written by older runs, still in warehouses
    # discover scored (eventatlas.discover.evaluate): all induced types, all mentions, those whose span is gold
    _spec("n_types", IND, count=True),
    _spec("n_mentions", IND, count=True),
    _spec("n_matched", IND, count=True),
    # naming / linking induced clusters (eventatlas.evaluation.naming)
    _spec("naming_hits@{k}", NAM),
    _spec("naming_hits@1", NAM, default=0),
    _spec("naming_mrr", NAM, default=1),
    _spec("naming_mean_rank", NAM, lower=True, count=True),
    _spec("naming_n_clusters", NAM, count=True),
    _spec("gold_type_coverage", NAM),  # share of the part's gold types that are some induced type's majority
    _spec("linking_hits@{k}", LNK),
    _spec("linking_hits@10", LNK, default=0),
    _spec("linking_mrr", LNK, default=1),
    _spec("linking_mean_rank", LNK, lower=True, count=True),
    _spec("linking_n_clusters", LNK, count=True),
    _spec("linking_unmapped_clusters", LNK, count=True),
    # event pairs (eventatlas.evaluation.pairs): each similarity set has its own accuracy
    _spec("hard_sim_acc", SIM, default=0),
    _spec("hard_sim_ext_acc", SIM, default=1),
    _spec("transitive_spearman", SIM, default=2),
    _spec("mcnc_acc", SIM, default=3),
    _spec("mcnc_random", SIM),  # chance level of the same blocks
    # event detection (eventatlas.evaluation.detection): strict trigger spans, micro over sentences
    _spec("tc_f1", DET, default=0),
    _spec("ti_f1", DET, default=1),
    _spec("tc_precision", DET),
    _spec("tc_recall", DET),
    _spec("ti_precision", DET),
    _spec("ti_recall", DET),
    _spec("n_predicted", DET, count=True),
    _spec("n_gold", DET, count=True),
    _spec("threshold", DET, TRN, count=True),  # the dev-chosen identification threshold (a setting, not a score)
    # retrieval (eventatlas.evaluation.retrieval, frames.ranking_recall, emr)
    _spec("map", RET, default=0),
    _spec("r_precision", RET, default=1),
    _spec("recall_all", RET, default=2),
    _spec("recall_same", RET),
    _spec("recall_diff", RET),
    _spec("p@{k}", RET),
    _spec("recall@{k}", RET, GRD),
    # among the relevant items whose trigger lemma differs from every example's: the share in the top k
    _spec("novel_recall@{k}", RET),
    _spec("novel_queries", RET, count=True),
    _spec("dev_rule", RET),  # EMR's dev rule: mean of MAP and novel_recall@50 (eventatlas.emr.dev)
    _spec("map_std", RET, lower=True),  # spread of MAP over repetitions: steadier is better
    # grounding (eventatlas.evaluation.grounding, eventatlas.grounding.discovery)
    _spec("recall_at_min", GRD, default=0),
    _spec("strict_acc", GRD, default=1),
    _spec("strict_acc_top_min", GRD),
    _spec("micro_p", GRD),
    _spec("micro_r", GRD),
    _spec("micro_f1", GRD),
    _spec("macro_p", GRD),
    _spec("macro_r", GRD),
    _spec("macro_f1", GRD),
    _spec("recall_at_min_atomic_bound", GRD),
    _spec("discovery_recall@{k}", GRD),
    _spec("discovery_events", GRD, count=True),
    _spec("discovery_linked", GRD),
    # known or new (eventatlas.discover.score.novelty): the new verdicts against hidden types
    _spec("new_f1", DIS, default=0),
    _spec("new_precision", DIS, default=1),
    _spec("new_recall", DIS, default=2),
    _spec("hidden_linked", DIS),
    _spec("n_new", DIS, count=True),
    _spec("n_hidden_present", DIS, count=True),
    _spec("n_hidden_mapped_types", DIS, count=True),
    # facts of the training (induction's stopping rules, frame_dml's chosen settings)
    _spec("stop_epoch_paper", TRN, count=True, default=0),
    _spec("stop_epoch_code", TRN, count=True, default=1),
    _spec("stop_epoch_dev", TRN, count=True),  # batch_attention select_on: dev (eventatlas.induction.dev)
    # (chosen hyperparameters and counts: shown as they are, never ranked like a score)
    _spec("alpha_one_step", TRN, count=True),
    _spec("alpha_two_step", TRN, count=True),
    _spec("margin", TRN, count=True),
    _spec("epochs_selected", TRN, count=True),
    _spec("seconds_per_epoch", TRN, count=True),
    _spec("train_seconds", TRN, count=True),
    # atlas links against the hand mappings (eventatlas.atlas.gold; `_renamed`: queries names cannot help)
    _spec("hits@{k}", ATL),
    _spec("hits@1", ATL, default=0),
    _spec("mrr", ATL, default=1),
    _spec("n_queries", ATL, count=True),
    _spec("hits@{k}_renamed", ATL),
    _spec("mrr_renamed", ATL),
    _spec("n_queries_renamed", ATL, count=True),
    _spec("cluster_frame_share", ATL),
)


def _index(specs: tuple[MetricSpec, ...]) -> tuple[dict[str, MetricSpec], tuple[tuple[MetricSpec, re.Pattern], ...]]:
    """Exact names and families (with their patterns); refuses a table that gives one metric two identities."""
    exact: dict[str, MetricSpec] = {}
    families: list[MetricSpec] = []
    for s in specs:
        if not s.tasks:
            raise ValueError(f"metric spec {s.name!r} names no task")
        if s.is_family:
            if not s.higher_is_better:
                raise ValueError(f"metric family {s.name!r}: a family must be higher-is-better (the warehouse "
                                 "stores directions by exact name)")
            if any(f.name == s.name for f in families):
                raise ValueError(f"metric family {s.name!r} is declared twice")
            families.append(s)
        elif s.name in exact:
            raise ValueError(f"metric {s.name!r} is declared twice")
        else:
            exact[s.name] = s
        if s.headline is not None and IND not in s.tasks:
            raise ValueError(f"headline metric {s.name!r}: the run summary table shows induction rows only")
    for s in exact.values():
        for f in families:
            if f.matches(s.name) and (f.fraction, f.higher_is_better) != (s.fraction, s.higher_is_better):
                raise ValueError(f"metric {s.name!r} disagrees with its family {f.name!r} on scale or direction")
    for field in ("default", "headline"):
        seen: dict[tuple, str] = {}
        for s in specs:
            pos = getattr(s, field)
            if pos is None:
                continue
            for t in s.tasks if field == "default" else ("",):
                if (t, pos) in seen:
                    raise ValueError(f"{field} position {pos} of {t or 'the summary'} is taken by {seen[(t, pos)]!r} "
                                     f"and {s.name!r}")
                seen[(t, pos)] = s.name
    return exact, tuple((f, _pattern(f.name)) for f in families)


def _pattern(name: str) -> re.Pattern:
    return re.compile(re.escape(name).replace(re.escape(_K), r"[1-9][0-9]*"))


_indexed: tuple | None = None  # (the table indexed, its index): rebuilt when METRIC_SPECS is replaced


def _current() -> tuple[dict[str, MetricSpec], tuple[tuple[MetricSpec, re.Pattern], ...]]:
    global _indexed
    if _indexed is None or _indexed[0] is not METRIC_SPECS:
        _indexed = (METRIC_SPECS, _index(METRIC_SPECS))
    return _indexed[1]


_current()  # a contradictory table fails at import, not when a page is drawn


def spec_for(metric: str) -> MetricSpec | None:
    """The spec declaring ``metric`` (an exact entry, else the family that matches), or None."""
    exact, families = _current()
    if metric in exact:
        return exact[metric]
    return next((f for f, pat in families if pat.fullmatch(metric)), None)


def is_fraction(metric: str) -> bool:
    """Shown x100; an undeclared metric counts as a fraction."""
    s = spec_for(metric)
    return True if s is None else s.fraction


def higher_is_better(metric: str) -> bool:
    s = spec_for(metric)
    return True if s is None else s.higher_is_better


def scale(metric: str) -> float:
    """The factor a value is shown with: 100 for fractions, 1 for counts, ranks and epochs."""
    return 100.0 if is_fraction(metric) else 1.0


def default_metrics(specs: tuple[MetricSpec, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """Per task, its metrics shown first, in ``default`` order."""
    out: dict[str, list[tuple[int, str]]] = {}
    for s in METRIC_SPECS if specs is None else specs:
        if s.default is not None:
            for t in s.tasks:
                out.setdefault(t, []).append((s.default, s.name))
    return {t: tuple(n for _, n in sorted(v)) for t, v in out.items()}


def headline_metrics(specs: tuple[MetricSpec, ...] | None = None) -> tuple[str, ...]:
    """The run summary table's columns, in ``headline`` order."""
    shown = [s for s in (METRIC_SPECS if specs is None else specs) if s.headline is not None]
    return tuple(s.name for s in sorted(shown, key=lambda s: s.headline))


def direction_rows(specs: tuple[MetricSpec, ...] | None = None) -> list[tuple[str, bool]]:
    """``(metric, higher_is_better)`` of every exact name: the rows ``metric_direction`` holds."""
    return sorted((s.name, s.higher_is_better) for s in (METRIC_SPECS if specs is None else specs) if not s.is_family)
