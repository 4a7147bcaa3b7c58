"""Tools on ingested data and finished runs: few-shot mention search, event grounding of a marked text."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .base import (_fail, app, check_device, console, dataset_dir, PANEL_ATLAS, read_root, run_dir)


@app.command(rich_help_panel=PANEL_ATLAS,
             short_help="Few-shot retrieval: rank mentions like a few examples")
def search(
    dataset: str = typer.Option(..., "--dataset", help="ingested corpus to search (its mentions)"),
    examples: Optional[Path] = typer.Option(None, "--examples", help="JSON lines: a sentence with its trigger in "
                                            "[brackets] (a string or {\"text\": ...}) or {\"mention_id\": ...}"),
    query: Optional[List[str]] = typer.Option(None, "--query", "-q", help="an example on the command line: a "
                                              "sentence with its trigger in [brackets] (repeatable)"),
    model: str = typer.Option("auto", "--model", help="auto (the ranker the dev rule chose: a saved emr model, else "
                              "adhoc) | adhoc (mean cosine) | siamese (trained on the examples now) | run:<run id> (an "
                              "emr run's tuned encoder or meta network) | meta:<run id>"),
    top: int = typer.Option(50, "--top", help="results to show"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="also write the results (.csv or .parquet)"),
    representation: Optional[str] = typer.Option(None, "--representation", "-r", help="default: the one measured "
                                                 "best for the encoder (trigger; a saved model's own)"),
    encoder: Optional[str] = typer.Option(None, "--encoder", help="HF id, local path or run:<run id> of a saved "
                                          "model (default all-MiniLM-L6-v2)"),
    epochs: int = typer.Option(50, "--epochs", help="siamese: training epochs"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Few-shot event mention retrieval: rank a corpus's mentions by similarity to a few examples."""
    if output is not None and output.suffix.lower() not in (".csv", ".parquet"):
        _fail(f"--output {output}: give a .csv or .parquet path", code=2)
    if examples is None and not query:
        _fail("no examples: give --examples FILE or --query \"a sentence with its [trigger]\"", code=2)
    if examples is not None and not examples.is_file():  # before the encoder's imports (seconds)
        _fail(f"{examples}: examples file not found", code=2)
    read_root(warehouse=False)
    ddir = dataset_dir(dataset)
    check_device(device)
    from ..emr.search import SearchError
    from ..emr.search import search as run_search

    bar, why = None, None
    if model == "auto":
        from ..emr.search import default_ranker

        model, why = default_ranker(encoder)
    try:
        kw: dict[str, Any] = {}
        if model == "siamese":
            from tqdm.auto import tqdm

            from ..emr.models import SiameseParams

            bar = tqdm(total=epochs, desc="siamese", unit="epoch")
            kw = {"siamese": SiameseParams(epochs=epochs),
                  "on_epoch": lambda done, total: bar.update(done - bar.n)}
        table = run_search(ddir, examples, queries=query or (), model=model, top=top, model_id=encoder,
                           representation=representation, device=device, seed=seed, **kw)
    except (SearchError, FileNotFoundError) as e:  # bad input: examples, dataset, --model
        _fail(str(e), code=2)
    finally:
        if bar is not None:
            bar.close()
    rows = []
    for r in table.to_pylist():
        a, b, s = r["trigger_start"], r["trigger_end"], r["sentence"]
        # the trigger in brackets as well as in colour: redirected output stays readable
        text = f"{escape(s[:a])}[bold magenta]{escape('[' + s[a:b] + ']')}[/bold magenta]{escape(s[b:])}"
        rows.append((r["rank"], round(r["score"], 4), text, r["doc_id"], ", ".join(r["labels"] or [])))
    if why is not None:  # said once the search succeeded: bad input is refused in one line
        console.print(f"note: --model {model} ({why})", markup=False, soft_wrap=True)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    console.print(f"ranked by {model} over the {meta.get('representation')} representation of "
                  f"{meta.get('encoder')}", markup=False, soft_wrap=True)
    given = " + ".join(([str(examples)] if examples is not None else []) + ([f"{len(query)} --query"] if query else []))
    t = Table(title=f"{dataset}: top {len(rows)} for {given} ({model}, {meta.get('representation')})")
    for c in ("rank", "score", "sentence", "doc_id", "labels"):
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*[str(x) for x in row])
    console.print(t)
    if output is not None:
        from ..io import atomic_path, write_parquet

        if output.suffix.lower() == ".parquet":
            write_parquet(table, output)
        else:
            import pyarrow as pa
            import pyarrow.csv as pcsv

            from ..escaping import csv_cell

            labels = pa.array(["|".join(x or []) for x in table["labels"].to_pylist()], pa.string())
            flat = table.set_column(table.schema.get_field_index("labels"), "labels", labels)
            # text a spreadsheet would run as a formula (a sentence starting with "=") is neutralised
            flat = pa.table({n: pa.array([csv_cell(v) for v in c.to_pylist()], c.type) if pa.types.is_string(c.type)
                             else c for n, c in zip(flat.column_names, flat.columns)})
            output.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(output) as tmp:  # nothing half-written
                pcsv.write_csv(flat, tmp)
        console.print(f"wrote {len(rows)} results to {output}", markup=False)


@app.command(rich_help_panel=PANEL_ATLAS,
             short_help="Ground a marked mention to events (hierarchical)")
def ground(
    dataset: str = typer.Option(..., "--dataset", help="grounding dataset whose events are the candidates"),
    run: str = typer.Option(..., "--run", help="run id of a finished `grounding` run (or its directory)"),
    text: str = typer.Option(..., "--text", help='text with the mention in [brackets], e.g. "Police [arrested] him."'),
    variant: Optional[str] = typer.Option(None, "--variant", help="bi-encoder variant (default: the run's best on dev)"),
    top: int = typer.Option(8, "--top", help="candidates shown (bi-encoder only)"),
    device: str = typer.Option("cpu", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Ground a marked mention to a set of events (hierarchical event grounding): the bi-encoder's
    ranking, rescored by the run's cross-encoder when it has one (predicted = score >= tau_c)."""
    ddir = dataset_dir(dataset)
    rdir = run_dir(run)
    check_device(device)
    from ..grounding.link import GroundError, ground_text

    try:
        out = ground_text(ddir, rdir, text, variant=variant, top=top, device=device)
    except GroundError as e:  # bad input: text, run, dataset, --variant
        _fail(str(e), code=2)
    how = f"cross-encoder, tau_c = {out['tau_c']:.2f}" if out["cross"] else f"bi-encoder {out['variant']}, top {top}"
    pred = {r["type_id"] for r in out["predicted"]}
    t = Table(title=f"{out['mention']!r}: {len(pred) or 'no'} event(s) predicted ({how})")
    for c in ("predicted", "score", "event", "name"):
        t.add_column(c, overflow="fold")
    for r in out["ranked"]:
        t.add_row("*" if r["type_id"] in pred else "", f"{r['score']:.4f}", r["type_id"], r["name"])
    console.print(t)
    if out["cross"] and not pred:
        console.print("NULL: no candidate reaches tau_c", markup=False)
