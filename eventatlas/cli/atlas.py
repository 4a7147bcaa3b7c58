"""``eventatlas atlas``: the map linking every event-type inventory (build, link, show, export, publish)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from .base import (_fail, app, check_device, console, dataset_dir, error_line, local_engine, PANEL_ATLAS,
                   print_warning, run_dir, run_flow, seed_option, split, unknown, use_prefect)
from .tables import print_rows

atlas_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="The atlas: every event-type inventory (datasets, FrameNet, Wikidata, the clusters of "
                             "runs) linked by evidence (their mentions) and by what they declare.")
app.add_typer(atlas_app, name="atlas", rich_help_panel=PANEL_ATLAS,
              short_help="The map linking every event-type inventory")

ENCODER_HELP = "HF id, local path or run:<run id> of a saved model (repeat or comma-separate; default all-MiniLM-L6-v2)"


def _cfg(max_per_type: Optional[int], top: int, k: int, seed: int, representation: str) -> dict[str, Any]:
    return {"max_per_type": max_per_type, "top": top, "k": k, "seed": seed, "representation": representation}


def _run(datasets, runs, pairs, encoders, config, full: bool, prune: bool) -> dict[str, Any]:
    """The atlas pipeline: through its flow when Prefect is in use, else in this process."""
    from ..errors import InputError
    from ..store.warehouse import WarehouseError
    from ..tracking.records import RecordError

    try:
        args = (datasets, runs, pairs, encoders, config, full, prune)
        if use_prefect():
            return run_flow("atlas", *args)
        from ..pipelines.atlas import atlas

        return atlas(*args, engine=local_engine(say=lambda _m: None))
    except (RecordError, WarehouseError, InputError, ValueError) as e:
        _fail(str(e), code=2 if isinstance(e, (InputError, ValueError)) else 1)


def _summary(out: dict[str, Any]) -> None:
    b, landed = out["build"], out["landed"]
    console.print(f"atlas {b['root']}: {len(b['built'])} parts built, {len(b['kept'])} unchanged, "
                  f"{len(b['removed'])} removed in {b['seconds']:.1f}s; warehouse: {len(landed['landed'])} parts "
                  f"landed, {landed['unchanged']} unchanged, {len(landed['dropped'])} dropped"
                  + (f"; scores: run {Path(b['record']).parent.name}" if b.get("record") else ""),
                  markup=False, soft_wrap=True)


@atlas_app.command("build")
def build_cmd(
    dataset: Optional[List[str]] = typer.Option(None, "--dataset", help="inventories (default: every ingested dataset with event types)"),
    run: Optional[List[str]] = typer.Option(None, "--run", help="runs whose clusterings join (default: every run with assignments)"),
    encoder: Optional[List[str]] = typer.Option(None, "--encoder", help=ENCODER_HELP),
    max_per_type: Optional[int] = typer.Option(None, "--max-per-type", help="mentions sampled per type (default: all)"),
    top: int = typer.Option(5, "--top", help="learned links kept per type and scorer"),
    k: int = typer.Option(10, "--k", help="neighbours per mention of the mention vote"),
    seed: int = typer.Option(0, "--seed", help="the mention sample and the gold's dev/test split"),
    representation: str = typer.Option("trigger", "--representation", "-r"),
    full: bool = typer.Option(False, "--full", help="rebuild every part (default: only what changed)"),
) -> None:
    """Build or update the atlas: nodes, declared links, learned links of every non-FrameNet inventory to
    every FrameNet one; only the parts whose inputs changed are rebuilt, then landed in the warehouse."""
    datasets = [dataset_dir(d).name for d in split(dataset) or []] or None
    runs = [run_dir(r).name for r in split(run) or []] if run is not None else None
    out = _run(datasets, runs, None, split(encoder), _cfg(max_per_type, top, k, seed, representation), full, True)
    _summary(out)


def _inventory_args(name: str) -> tuple[list[str], list[str]]:
    """(datasets, runs) an inventory name needs: a dataset, or run:<id>/<rep>/<algo>."""
    if name.startswith("run:"):
        return [], [run_dir(name[4:].split("/", 1)[0], id_only=True).name]
    return [dataset_dir(name).name], []


@atlas_app.command("link")
def link_cmd(
    source: str = typer.Option(..., "--from", help="source inventory: a dataset, or run:<run id>/<rep>/<algo>"),
    target: str = typer.Option(..., "--to", help="target inventory (e.g. a FrameNet dataset)"),
    encoder: Optional[List[str]] = typer.Option(None, "--encoder", help=ENCODER_HELP),
    max_per_type: Optional[int] = typer.Option(None, "--max-per-type", help="mentions sampled per type (default: all)"),
    top: int = typer.Option(5, "--top", help="learned links kept per type and scorer"),
    k: int = typer.Option(10, "--k", help="neighbours per mention of the mention vote"),
    seed: int = typer.Option(0, "--seed"),
    representation: str = typer.Option("trigger", "--representation", "-r"),
    show: int = typer.Option(20, "--show", help="source types printed with their best target"),
) -> None:
    """Link two inventories from their mentions (every scorer), add the links to the atlas, and score them
    against the hand mapping when the pair has one (task atlas in the warehouse)."""
    d1, r1 = _inventory_args(source)
    d2, r2 = _inventory_args(target)
    out = _run(d1 + d2, r1 + r2, [[source, target]], split(encoder), _cfg(max_per_type, top, k, seed, representation),
               False, False)
    _summary(out)
    metrics = out["build"].get("metrics")
    if metrics is None and out["build"].get("record"):
        from ..tracking.records import load_metrics, read_record

        metrics = load_metrics(read_record(out["build"]["record"]))
    rows = sorted({(m["split"], m["variant"], m["metric"], m["value"]) for m in metrics or []
                   if m["metric"] in ("hits@1", "hits@5", "mrr", "n_queries", "cluster_frame_share")})
    if rows:
        print_rows(["split", "scorer", "metric", "value"], rows, title=f"{source} -> {target} against the hand mapping")
    from ..atlas.build import atlas_dir, read_part
    from ..atlas.link import encoder_label

    name = f"learned/{source}__{target}__{encoder_label((split(encoder) or [None])[0])}"
    try:
        t = read_part(atlas_dir(), name).to_pylist()
    except KeyError:
        return
    best = {}
    for r in t:
        if r["rank"] == 1 and r["method"] in ("combined", "vote", "centroid"):
            best.setdefault(r["source"], {})[r["method"]] = r["target"].split("::", 1)[1]
    print_rows(["source type", "combined", "vote", "centroid"],
               [(s.split("::", 1)[1], v.get("combined", ""), v.get("vote", ""), v.get("centroid", ""))
                for s, v in sorted(best.items())], title="best target per source type", max_rows=show)


@atlas_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="a node id (<inventory>::<type>), a type id or a type name"),
    top: int = typer.Option(5, "--top", help="learned links shown per scorer and inventory"),
    sentences: int = typer.Option(3, "--sentences", help="evidence sentences shown per link"),
) -> None:
    """A type's neighbourhood across inventories: declared links, the best learned links per scorer with
    their scores, and the evidence sentences behind them."""
    from ..results.atlas_query import neighbourhood
    from ..store.warehouse import WarehouseError
    from .base import read_root

    read_root()
    try:
        found = neighbourhood(name, top=top, sentences=sentences)
    except (WarehouseError, LookupError) as e:
        _fail(str(e).strip("'\""), code=2)
    for node in found:
        console.print(f"[bold]{node['node_id']}[/bold]  ({node['kind']}, {node['ontology'] or 'no ontology'}, "
                      f"{node['n_mentions']} mentions){': ' + node['definition'][:160] if node.get('definition') else ''}",
                      soft_wrap=True, highlight=False)
        for s in node["examples"]:
            console.print(f"    e.g. {s}", markup=False, soft_wrap=True)
        if node["declared"]:
            print_rows(["relation", "direction", "other", "provenance"],
                       [(r["relation"], r["direction"], r["other"], r["provenance"]) for r in node["declared"]],
                       title="declared links")
        if node["learned"]:
            print_rows(["scorer", "rank", "other", "score", "raw", "encoder", "evidence"],
                       [(r["method"], r["rank"], r["other"], r["score"], r["raw_score"], r["encoder"] or "",
                         " | ".join(r["sentences"])) for r in node["learned"]], title="learned links (score: calibrated)")


@atlas_app.command("export")
def export_cmd(
    fmt: str = typer.Option(..., "--format", help="csv | jsonl | skos (RDF Turtle) | html (offline interactive graph)"),
    out: Path = typer.Option(Path("atlas_export"), "--out", "-o", help="output directory"),
) -> None:
    """Write the atlas (from the warehouse) as CSV, JSON lines, SKOS/RDF Turtle or one offline HTML page."""
    from ..atlas.export import FORMATS, export
    from ..results.atlas_query import all_rows, evidence_sentences
    from ..store.warehouse import WarehouseError

    from .base import read_root

    if fmt not in FORMATS:
        _fail(f"--format {fmt!r}: use one of {', '.join(FORMATS)}", code=2)
    read_root()
    try:
        nodes, links = all_rows()
    except WarehouseError as e:
        _fail(str(e))
    paths = export(nodes, links, fmt, out, evidence_sentences(links) if fmt == "html" else None)
    console.print(f"wrote {len(nodes)} nodes and {len(links)} links: {', '.join(map(str, paths))}", markup=False,
                  soft_wrap=True)


@atlas_app.command("publish")
def publish_cmd() -> None:
    """Land the atlas build on disk in the warehouse again (e.g. after the warehouse was busy)."""
    from ..atlas.build import atlas_dir
    from ..store.publishing import publish_atlas
    from ..store.warehouse import WarehouseError

    try:
        out = publish_atlas(atlas_dir(), warn=print_warning)
    except WarehouseError as e:
        _fail(str(e))
    console.print(f"{len(out['landed'])} parts landed, {out['unchanged']} unchanged, {len(out['dropped'])} dropped",
                  markup=False)


@app.command(rich_help_panel=PANEL_ATLAS)
def discover(
    dataset: Optional[str] = typer.Argument(None, help="ingested dataset: its mentions (detected ones, e.g. "
                                                       "`eventatlas detect`), or its text with --detector"),
    k: Optional[int] = typer.Option(None, "--k", min=2, help="number of types (default: the best cosine silhouette)"),
    link_to: Optional[List[str]] = typer.Option(None, "--link-to", help="known inventories (ingested datasets, "
                                                "comma-separated or repeated) to link the types to"),
    detector: Optional[str] = typer.Option(None, "--detector", help="run:<id> of a saved detector: detect the "
                                           "dataset's mentions first (into <dataset>_detected)"),
    algorithm: str = typer.Option("agglomerative", "--algorithm", "-a", help="agglomerative, manifold, manifold_sym"),
    encoder: Optional[str] = typer.Option(None, "--encoder", help="HF id, local path or run:<id> of a saved model, or "
                                          "detector: the --detector's own, its vectors kept from the detection pass "
                                          "(default: detector with --detector, else all-MiniLM-L6-v2)"),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0, help="with --detector: its "
                                              "identification threshold (default: the one dev chose)"),
    seed: int = typer.Option(0, "--seed", callback=seed_option),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    fmt: Optional[List[str]] = typer.Option(None, "--format", help="exports besides the run's page.html: html | csv | "
                                            "jsonl | skos (RDF Turtle); comma-separated or repeated"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="directory of the --format files (default: the "
                                       "run's)"),
    from_run: Optional[str] = typer.Option(None, "--from-run", help="export this discover run (its id) with --format "
                                           "instead of discovering again"),
) -> None:
    """Induce the event types of a dataset's mentions, describe each (size, triggers, medoid sentences, a name)
    and link them to known inventories; writes types, assignments and links (Parquet) and an offline page
    (page.html: cards, a map of the mentions, a filter) into a run directory. With --from-run, only exports."""
    from ..discover.export import parse_formats
    from ..errors import InputError
    from ..modeling.saved import ModelError

    try:
        formats = parse_formats(fmt)
    except ValueError as e:
        _fail(str(e), code=2)
    if from_run is not None:
        if dataset is not None or k is not None or link_to or detector is not None:
            _fail("--from-run exports a finished run: give no DATASET, --k, --link-to or --detector with it", code=2)
        _export(run_dir(from_run), formats or ["html"], out)
        return
    if dataset is None:
        _fail("give a DATASET to discover types in (or --from-run <run id> to export a finished run)", code=2)
    if algorithm not in ("agglomerative", "manifold", "manifold_sym"):
        unknown("clustering algorithm", algorithm, ("agglomerative", "manifold", "manifold_sym"))
    check_device(device)
    dataset_dir(dataset)
    known = split(link_to) or []
    for name in known:
        dataset_dir(name)  # a misspelt inventory: one line, before any work
    args = (dataset, k, known, detector, algorithm, encoder, seed, device, threshold)
    try:
        if use_prefect():
            summary = run_flow("discover", *args)
        else:
            from ..pipelines.discover import discover as pipeline

            summary = pipeline(*args, engine=local_engine(say=lambda m: console.print(m, markup=False, soft_wrap=True)))
    except (InputError, ModelError, FileNotFoundError, ValueError) as e:
        _fail(error_line(e), code=2)
    if summary.get("detected"):
        d = summary["detected"]["detection"]
        console.print(f"detected {d['mentions']} mentions in {d['sentences']} sentences -> "
                      f"{summary['detected']['dataset']}", markup=False, soft_wrap=True)
    _print_cards(summary)
    if formats:
        _export(Path(summary["files"]["types"]).parent, formats, out)


def _export(rdir: Path, formats: list[str], out: Optional[Path]) -> None:
    """Write a discover run's exports and print their paths."""
    from ..discover.export import export
    from ..errors import InputError

    try:
        paths = export(rdir, formats, out)
    except (InputError, OSError) as e:
        _fail(error_line(e), code=2 if isinstance(e, InputError) else 1)
    console.print(f"exported: {', '.join(map(str, paths))}", markup=False, soft_wrap=True, highlight=False)


def _print_cards(summary: dict) -> None:
    import pyarrow.parquet as pq

    types = pq.read_table(summary["files"]["types"]).to_pylist()
    best: dict[str, dict] = {}
    if "links" in summary["files"]:
        for r in pq.read_table(summary["files"]["links"]).to_pylist():
            if r["method"] == "centroid" and r["rank"] == 1:
                best.setdefault(r["source"].split("::", 1)[1], {})[r["target"].split("::", 1)[0]] = r
    console.print(f"{summary['mentions']} mentions of {summary['dataset']} -> {summary['types']} types "
                  f"({summary['how'].split(':', 1)[1].strip()})", markup=False, soft_wrap=True, highlight=False)
    if summary.get("new") is not None:
        cfg = summary.get("config") or {}
        console.print(f"{summary['new']} of {summary['types']} types new (new: no link to "
                      f"{', '.join(summary['linked_to'])} with a {cfg.get('novelty_scorer')} raw score of "
                      f"{cfg.get('new_below')} or more)",
                      markup=False, soft_wrap=True, highlight=False)
    for t in types:
        verdict = {True: "  NEW", False: "  known"}.get(t.get("new"), "")
        console.print(f"{t['type_id']:>4}  {t['name']}  ({t['size']} mentions, cohesion {t['cohesion']:.2f}; "
                      f"triggers: {', '.join(t['triggers'])}){verdict}", markup=False, soft_wrap=True,
                      highlight=False)
        for ex in t["examples"][:2]:
            console.print(f"        e.g. {ex}", markup=False, soft_wrap=True, highlight=False)
        for inv, r in sorted(best.get(t["type_id"], {}).items()):
            console.print(f"        nearest in {inv}: {r['target'].split('::', 1)[1]} (centroid cosine "
                          f"{r['raw_score']:.2f})", markup=False, soft_wrap=True, highlight=False)
    written = [*summary["files"].values(), *([summary["page"]] if summary.get("page") else [])]
    console.print(f"written: {', '.join(written)}", markup=False, soft_wrap=True, highlight=False)
