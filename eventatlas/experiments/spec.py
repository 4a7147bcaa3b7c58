"""Declared experiments: one YAML per headline result under ``experiments/``, a typed schema.

An experiment names its datasets (an alias -> reader, dataset name and default input), its methods with
their params (the JSON of ``--params``), seeds, cells (train a method on a dataset, or ``evaluate`` a
cell's saved model on another dataset), the table (rows x columns, each a filter over leaderboard
columns), the reference figures with their source, the project's goal and a ``quick:`` override that
shrinks it to the shipped samples. Every key is checked: an unknown one is refused naming the file and
the key; an unknown method or reader likewise, in one line (:class:`ExperimentError`).
"""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import config
from ..names import BadName, check_name, why_bad
from ..tracking.runinfo import check_seeds

EXPERIMENTS_DIR = config.resource_dir("experiments")
# leaderboard columns a table cell may filter on (eventatlas.results.leaderboard.IDENTITY, metric) and the experiment's
# own cell name
FILTER_KEYS = ("task", "dataset", "split", "setting", "method", "trained_on", "representation", "clustering",
               "variant", "metric", "cell")


# bounds on a declaration, so no file makes a plan that runs (or prints) without end (its seeds': check_seeds)
MAX_BYTES = 256_000  # the largest declaration is under 10 kB
MAX_DEPTH = 50  # YAML nesting (a declaration needs about 6)
MAX_INT_DIGITS = 30  # an integer scalar
MAX_CELLS = 1000  # declared cells, or methods x datasets
MAX_CELL_RUNS = 5000  # cells x seeds


class ExperimentError(ValueError):
    """A bad or unknown experiment, in one line naming the file (and key)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetRef(_Strict):
    reader: str = Field(description="registry / reader name (datasets/registry.yaml)")
    name: str | None = Field(None, description="ingested dataset name (default: the registry's, `<name>_sample` "
                                               "for a sample)")
    input: str | None = Field(None, description="input path, absolute or under the shared data dir (under "
                                                "datasets/samples with `sample`; default: the registry's input)")
    sample: bool = Field(False, description="ingest the reader's shipped sample (datasets/samples)")


class Cell(_Strict):
    name: str
    dataset: str = Field(description="a dataset alias of this experiment")
    method: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="merged over the experiment's params")
    evaluate: str | None = Field(None, description="a training cell whose saved model (same seed) is applied")

    @model_validator(mode="after")
    def _one_kind(self) -> "Cell":
        if (self.method is None) == (self.evaluate is None):
            raise ValueError(f"cell {self.name!r} needs exactly one of 'method' (train) or 'evaluate' (a cell)")
        return self


class Filter(_Strict):
    """Each value: exact, a LIKE pattern (``%`` any text) or ``~regex`` (full match); absent = any."""

    task: str | None = None
    dataset: str | None = None  # an alias of the experiment (resolved to the dataset name) or a name
    split: str | None = None
    setting: str | None = None
    method: str | None = None
    trained_on: str | None = None
    representation: str | None = None
    clustering: str | None = None
    variant: str | None = None
    metric: str | None = None
    cell: str | None = None  # a cell name, or a SQL LIKE pattern over cell names ("% k10")


class Table(_Strict):
    metric: str | None = Field(None, description="the metric of every cell that does not name one")
    rows: dict[str, Filter]
    columns: dict[str, Filter]
    chosen_on_test: list[str | tuple[str, str]] = Field(
        default_factory=list, description="rows (a label) or cells ([row, column]) whose setting or variant was "
                                          "picked on this same test set's labels, not on a dev set: the pages mark "
                                          "them (dagger) so no one reads them as a held-out figure")


class Source(_Strict):
    """Where a reference figure comes from. ``paper``: the source's name (for ``kind: own``, the project's own
    earlier measurement: which document or run). The pages label a ``paper`` figure as the paper's and an
    ``own`` one as an earlier measurement, never as a paper's."""

    paper: str
    table: str | None = None
    setting: str | None = None
    kind: Literal["paper", "own"] = "paper"


class Reference(_Strict):
    source: Source
    values: dict[str, dict[str, float]] = Field(description="row -> column -> figure (as shown: fractions x100)")


class Beat(_Strict):
    """``cell`` (row, column) better than ``over`` (another cell, times ``times`` when given: a ratio goal such
    as "at least 0.9 x the other") by ``by``, or at least ``at_least``."""

    cell: tuple[str, str]
    over: tuple[str, str] | None = None
    at_least: float | None = None
    by: float = 0.0
    times: float | None = Field(None, gt=0, description="with over: compare with this multiple of the other cell")

    @model_validator(mode="after")
    def _one_target(self) -> "Beat":
        if (self.over is None) == (self.at_least is None):
            raise ValueError("a goal's beats entry needs exactly one of 'over' (a cell) or 'at_least' (a figure)")
        if self.times is not None and self.over is None:
            raise ValueError("a goal's beats entry: 'times' needs 'over' (the cell it is a multiple of)")
        return self


class Goal(_Strict):
    text: str
    within: float | None = Field(None, description="every referenced cell at most this many points worse than "
                                                   "its reference")
    two_sided: bool = Field(False, description="`within` both ways (a reproduction: neither worse nor better)")
    beats: list[Beat] = Field(default_factory=list, description="row/column cell better than another by `by`")


class Experiment(_Strict):
    name: str
    title: str
    description: str | None = None
    datasets: dict[str, DatasetRef]
    methods: list[str]
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0])
    cells: list[Cell] | None = None
    table: Table
    references: list[Reference] = Field(default_factory=list)
    goal: Goal
    diagnosis: str | None = None
    quick: dict[str, Any] | None = None
    mode: Literal["full", "quick"] = "full"
    source: str = ""

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        return check_seeds(v, "seeds")

    def n_cells(self) -> int:
        """How many cells :meth:`all_cells` makes, without making them."""
        return len(self.cells) if self.cells is not None else len(self.methods) * len(self.datasets)

    def all_cells(self) -> list[Cell]:
        """The declared cells, else each method on each dataset (named ``<method>@<alias>``)."""
        if self.cells is not None:
            return list(self.cells)
        return [Cell(name=f"{m}@{a}", dataset=a, method=m) for m in self.methods for a in self.datasets]

    def cell_params(self, cell: Cell) -> dict[str, Any]:
        return _merge(self.params.get(cell.method or "", {}), cell.params)

    def dataset_name(self, alias: str) -> str:
        ref = self.datasets[alias]
        if ref.name:
            return ref.name
        from ..data.registry import dataset_entry

        base = dataset_entry(ref.reader).get("dataset") or ref.reader
        return f"{base}_sample" if ref.sample else base

    def table_cells(self) -> list[dict[str, Any]]:
        """One dict per (row, column): the merged filter (dataset aliases resolved), labels and order."""
        out = []
        for i, (rl, rf) in enumerate(self.table.rows.items()):
            for j, (cl, cf) in enumerate(self.table.columns.items()):
                f = {k: v for k, v in rf.model_dump().items() if v is not None}
                for k, v in cf.model_dump().items():
                    if v is not None:
                        if k in f and f[k] != v:
                            raise ExperimentError(f"{self.source}: table row {rl!r} and column {cl!r} disagree on "
                                                  f"{k} ({f[k]!r} vs {v!r})")
                        f[k] = v
                f.setdefault("metric", self.table.metric)
                if not f.get("metric"):
                    raise ExperimentError(f"{self.source}: table cell {rl!r} x {cl!r} has no metric (table.metric)")
                if f.get("dataset") in self.datasets:
                    f["dataset"] = self.dataset_name(f["dataset"])
                out.append({"row_label": rl, "col_label": cl, "row_order": i, "col_order": j,
                            **{k: f.get(k) for k in FILTER_KEYS}, "chosen_on_test": self._chosen_on_test(rl, cl)})
        return out

    def _chosen_on_test(self, row: str, col: str) -> bool:
        return any(m == row if isinstance(m, str) else tuple(m) == (row, col) for m in self.table.chosen_on_test)

    def digest(self) -> str:
        """The declaration's content hash: the same wherever the checkout lies (``source`` is a path)."""
        body = self.model_dump(mode="json", exclude={"source"})
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def _merge(base: Any, over: Any) -> Any:
    """``over`` deep-merged onto ``base``: mappings merge key by key, everything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def _one_line(path: Path | str, e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-after"))
    if err["type"] == "extra_forbidden":
        return f"{path}: unknown key {loc!r}"
    if err["type"] == "missing":
        return f"{path}: missing key {loc!r}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{path}: {msg}" if msg.startswith(f"{loc}:") else f"{path}: {loc}: {msg}"


def parse(data: Any, source: str | Path, *, quick: bool = False) -> Experiment:
    """An experiment from its YAML's mapping; ``quick`` applies its ``quick:`` override. Checks keys,
    cells, methods and readers (one-line :class:`ExperimentError`)."""
    if not isinstance(data, dict):
        raise ExperimentError(f"{source}: an experiment is a mapping of keys (name, datasets, methods, ...)")
    try:
        exp = Experiment.model_validate({**data, "source": str(source)})
        if exp.quick is not None:  # the override is checked even when not used
            Experiment.model_validate({**_merge(data, exp.quick), "quick": None, "source": str(source)})
    except ValidationError as e:
        raise ExperimentError(_one_line(source, e)) from None
    if quick:
        if exp.quick is None:
            raise ExperimentError(f"{source}: no 'quick:' override to run it on the samples")
        exp = Experiment.model_validate({**_merge(data, exp.quick), "quick": None, "mode": "quick",
                                         "source": str(source)})
    _check_names(exp)
    return exp


def _check_names(exp: Experiment) -> None:
    from ..methods import SPECS
    from ..readers import REGISTRY

    src = exp.source
    _name(src, exp.name, "name")
    for m in [*exp.methods, *exp.params]:
        if m not in SPECS:
            raise ExperimentError(f"{src}: unknown method {m!r}; known: {', '.join(sorted(SPECS))}")
    for alias, ref in exp.datasets.items():
        if ref.reader not in REGISTRY:
            raise ExperimentError(f"{src}: dataset {alias!r}: unknown reader {ref.reader!r}; known: "
                                  f"{', '.join(sorted(REGISTRY))}")
        _name(src, exp.dataset_name(alias), f"datasets.{alias}.name")  # a directory under the data root
    if exp.n_cells() > MAX_CELLS:
        raise ExperimentError(f"{src}: {exp.n_cells()} cells, at most {MAX_CELLS} (declare fewer methods x datasets "
                              "or split the experiment)")
    check_plan(exp, exp.seeds)
    for where, value in model_refs(exp):
        why = why_bad_ref(value)
        if why:
            raise ExperimentError(f"{src}: {where} {value!r}: {why}")
    cells = exp.all_cells()
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ExperimentError(f"{src}: cell names repeat: {sorted(n for n in set(names) if names.count(n) > 1)}")
    for c in cells:
        if c.dataset not in exp.datasets:
            raise ExperimentError(f"{src}: cell {c.name!r}: dataset {c.dataset!r} is not one of datasets: "
                                  f"{', '.join(exp.datasets)}")
        if c.method is not None and c.method not in exp.methods:
            raise ExperimentError(f"{src}: cell {c.name!r}: method {c.method!r} is not in methods: "
                                  f"{', '.join(exp.methods)}")
        if c.evaluate is not None:
            target = next((t for t in cells if t.name == c.evaluate), None)
            if target is None or target.method is None:
                raise ExperimentError(f"{src}: cell {c.name!r}: evaluate {c.evaluate!r} is not a training cell")
    import fnmatch

    for f in [*exp.table.rows.values(), *exp.table.columns.values()]:
        # a cell filter is a name or a SQL LIKE pattern (% any text); the quick form may leave cells out
        if (f.cell is not None and not f.cell.startswith("~") and exp.mode == "full"
                and not fnmatch.filter(names, f.cell.replace("%", "*"))):
            raise ExperimentError(f"{src}: table filter cell {f.cell!r} matches no cell; cells: {', '.join(names)}")
    exp.table_cells()  # row/column conflicts and missing metrics
    given = [(r, c) for ref in exp.references for r, by in ref.values.items() for c in by]
    twice = sorted({x for x in given if given.count(x) > 1})
    if twice:  # a table cell shows one reference figure (a paper's or an earlier measurement), never two
        raise ExperimentError(f"{src}: references: more than one figure for cell(s) "
                              + "; ".join(f"{r} / {c}" for r, c in twice))
    rows, cols = set(exp.table.rows), set(exp.table.columns)
    named = [(f"references.{i}", r, c) for i, ref in enumerate(exp.references) for r, by in ref.values.items() for c in by]
    for m in exp.table.chosen_on_test:  # a row label alone marks the whole row
        if isinstance(m, str) and m not in rows:
            raise ExperimentError(f"{src}: table.chosen_on_test: {m!r} is not a table row (rows: "
                                  f"{', '.join(exp.table.rows)})")
    named += [("table.chosen_on_test", *m) for m in exp.table.chosen_on_test if not isinstance(m, str)]
    named += [("goal.beats", *b.cell) for b in exp.goal.beats] + [("goal.beats", *b.over) for b in exp.goal.beats if b.over]
    for where, r, c in named:
        if r not in rows or c not in cols:
            raise ExperimentError(f"{src}: {where}: {r!r} / {c!r} is not a table cell (rows: {', '.join(exp.table.rows)}; "
                                  f"columns: {', '.join(exp.table.columns)})")


def _name(src: str, value: Any, key: str) -> None:
    """The project's one name rule for a name that becomes a path (no separators, no '..', not absolute)."""
    try:
        check_name(value, key)
    except BadName as e:
        raise ExperimentError(f"{src}: {e}") from None


def check_plan(exp: Experiment, seeds: list[int]) -> None:
    """Refuse a plan of more than :data:`MAX_CELL_RUNS` cell runs (cells x seeds), in one line."""
    n = exp.n_cells() * len(seeds)
    if n > MAX_CELL_RUNS:
        raise ExperimentError(f"{exp.source}: {exp.n_cells()} cells x {len(seeds)} seeds = {n} cell runs, at most "
                              f"{MAX_CELL_RUNS}")


def model_refs(exp: Experiment, extra: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(where, value) of every ``run:`` reference to a saved model in the params (the experiment's, each
    cell's and ``extra``, the run's ``--params``)."""
    from ..modeling.saved import REF_PREFIX

    out: list[tuple[str, str]] = []

    def walk(obj: Any, where: str) -> None:
        if isinstance(obj, str) and obj.startswith(REF_PREFIX):
            out.append((where, obj))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{where}.{k}")
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{where}.{i}")

    walk(exp.params, "params")
    for c in exp.cells or []:
        walk(c.params, f"cells.{c.name}.params")
    walk(extra or {}, "--params")
    return out


def why_bad_ref(value: str) -> str | None:
    """Why ``value`` is not a well-formed ``run:<run id or prefix>`` / ``run:<method>:<dataset>:latest``
    reference (each optionally ``@<encoder>``), or None: every part is a name (no path parts, no glob)."""
    from ..modeling.saved import REF_PREFIX

    key, _, enc = value[len(REF_PREFIX):].strip().partition("@")
    if not key:
        return f"no run id after {REF_PREFIX!r}"
    parts = key.split(":")
    if len(parts) == 3 and parts[2] == "latest":
        parts = parts[:2]
    elif len(parts) != 1:
        return "not run:<run id>, run:<method>:<dataset>:latest (optionally @<encoder>)"
    for part in [*parts, *([enc] if enc else [])]:
        why = why_bad(part)
        if why:
            return f"{part!r} {why} (a run reference names runs, not paths or patterns)"
    return None


def experiment_files(directory: str | Path | None = None) -> dict[str, Path]:
    """name -> YAML file under ``experiments/`` (the name is the file's stem)."""
    d = Path(directory) if directory else EXPERIMENTS_DIR
    return {p.stem: p for p in sorted(d.glob("*.yaml"))}


class _StrictLoader(yaml.SafeLoader):
    """YAML as a declaration needs it: a repeated key (the last would win unseen), an anchor or alias (a
    few lines that expand to gigabytes), a merge key, nesting deeper than :data:`MAX_DEPTH` (recursion)
    and an integer of more than :data:`MAX_INT_DIGITS` digits are refused, naming the file and line."""

    source = ""
    _depth = 0

    def _refuse(self, mark: Any, what: str) -> None:
        raise ExperimentError(f"{self.source}:{mark.line + 1}: {what}")

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            self._refuse(event.start_mark, "anchors and aliases (&name, *name) are not allowed; write the value out")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                self._refuse(event.start_mark, f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._refuse(key_node.start_mark, "merge keys (<<) are not allowed; write the keys out")
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    self._refuse(key_node.start_mark, f"key {key!r} repeats (first on line {seen[key]})")
                seen[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: the base class refuses it
                pass
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_int(self, node: Any) -> int:
        text = str(self.construct_scalar(node))
        if len(text) > MAX_INT_DIGITS:
            self._refuse(node.start_mark, f"an integer of {len(text)} characters (at most {MAX_INT_DIGITS})")
        return self.construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_bounded_int)


def read_yaml(path: Path) -> Any:
    """A declaration file's YAML (:class:`_StrictLoader`), at most :data:`MAX_BYTES`, UTF-8; anything else
    is an :class:`ExperimentError` naming the file (and line)."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ExperimentError(f"{path}: {size} bytes, more than a declaration needs (at most {MAX_BYTES})")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ExperimentError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise ExperimentError(f"{path}: {e.strerror or e}") from None
    loader = _StrictLoader(text)
    loader.source = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ExperimentError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    finally:
        loader.dispose()


def load(name: str, *, quick: bool = False, directory: str | Path | None = None) -> Experiment:
    """The experiment ``name`` (or a YAML path); unknown names are refused with the known ones."""
    files = experiment_files(directory)
    path = Path(name) if name.endswith((".yaml", ".yml")) else files.get(name)
    if path is None or not path.is_file():
        import difflib

        close = difflib.get_close_matches(name, list(files), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ExperimentError(f"unknown experiment {name!r}{hint}; known: {', '.join(files) or '(none)'}")
    exp = parse(read_yaml(path), path, quick=quick)
    if exp.name != path.stem:
        raise ExperimentError(f"{path}: name {exp.name!r} must equal the file's name {path.stem!r}")
    return exp


def load_all(directory: str | Path | None = None, *, quick: bool = False) -> list[Experiment]:
    return [load(n, quick=quick, directory=directory) for n in experiment_files(directory)]
