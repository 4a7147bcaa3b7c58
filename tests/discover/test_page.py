"""A discover run's page and exports (eventatlas.discover.page / .export) on the mini world: one card per type,
hostile sentences shown as text, the map and the filter in a real browser, CSV / JSON lines / SKOS Turtle
rows per type, the command's --format and --from-run, and the report's section of discover runs."""
from __future__ import annotations

import csv
import html as htmllib
import json
import re
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.io import DatasetWriter
from support.atlas import CHROMIUM, dump_dom
from support.mini_events import SENTENCES, TRIGGERS, mini_tiny_bert, write_mini_events

HOSTILE = " </script><script>alert(1)</script> <b>bold</b> &amp;"
NEEDS_CHROMIUM = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")


def write_hostile(root):
    """The mini world with markup in every sentence (so every example and evidence sentence is hostile) and
    triggers that would end a script element (so every type name is hostile too)."""
    out = root / "datasets" / "hostile"
    with DatasetWriter(out, "hostile") as w:
        for t, sents in SENTENCES.items():
            w.write("event_types", {"dataset": "hostile", "type_id": t, "name": t, "ontology": "other"})
            for i, s in enumerate(sents):
                trig = TRIGGERS[t] if isinstance(TRIGGERS[t], str) else next(x for x in TRIGGERS[t] if x in s)
                s, trig = s.replace(trig, trig + "</script><!--", 1), trig + "</script><!--"
                a = s.index(trig)
                w.write("mentions", {"mention_id": f"h-{t}-{i}", "dataset": "hostile", "doc_id": f"h{t}{i}",
                                     "sent_idx": 0, "sentence": s + HOSTILE, "trigger_start": a,
                                     "trigger_end": a + len(trig), "trigger": trig, "labels": [t], "split": "all"})
        w.commit({"reader": "sample"})
    return out


@pytest.fixture
def run(eventatlas_env, tmp_path):
    """A discover run of the hostile world linked to the (clean) mini world, with its page."""
    from eventatlas import config
    from eventatlas.discover.page import write_page
    from eventatlas.discover.run import DiscoverConfig, discover

    write_mini_events(config.data_root())
    ddir = write_hostile(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    out = tmp_path / "discover-hostile"
    s = discover(ddir, out, DiscoverConfig(k=4, encoder=str(model), link_to=["mini_events"], device="cpu"))
    # a random encoder finds every type near a known one: the even types are made new, so both verdicts show
    t = pq.read_table(out / "types.parquet")
    new = pa.array([i % 2 == 1 for i in range(t.num_rows)])
    pq.write_table(t.set_column(t.schema.get_field_index("new"), "new", new), out / "types.parquet")
    return out, s, write_page(out), model


def data_json(page: str):
    """The page's data: its script element ends where the JSON does (no premature ``</script>``)."""
    opening = '<script id="data" type="application/json">'
    text = page[page.index(opening) + len(opening):].split("</script>", 1)[0]
    assert "<!--" not in text
    return json.loads(text)


def cards(page: str) -> list[dict[str, str]]:
    """Each card's data-* attributes (unescaped) and its text."""
    out = []
    for m in re.finditer(r'<article class="card"([^>]*)>(.*?)</article>', page, re.S):
        attrs = {k: htmllib.unescape(v) for k, v in re.findall(r'data-([a-z]+)="([^"]*)"', m.group(1))}
        out.append({**attrs, "body": m.group(2)})
    return out


def test_the_page_has_a_card_per_type_and_shows_markup_as_text(run):
    out, s, path, _ = run
    page = path.read_text(encoding="utf-8")
    types = pq.read_table(out / "types.parquet").to_pylist()
    got = cards(page)
    assert [c["type"] for c in got] == [t["type_id"] for t in types]
    for c, t in zip(got, types):
        assert htmllib.escape(t["name"], quote=False) in c["body"] and c["size"] == str(t["size"])
        assert c["verdict"] == ("new" if t["new"] else "known")
        assert c["body"].count("<mark>") >= min(3, t["size"])  # its examples, trigger marked
        assert "in mini_events" in c["body"] and '<tr class="link">' in c["body"]  # its links to the known types
    # the sentences' markup is text: never an element, always escaped
    assert "<b>bold</b>" not in page and "alert(1)</script>" not in page and page.count("<script") == 2
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt; &amp;amp;" in page
    assert "&lt;/script&gt;&lt;!-- / " in page  # hostile triggers, in the cards' names and triggers
    data = data_json(page)  # ... and in the map's legend, inside the JSON
    assert [t["name"] for t in data["types"]] == [t["name"] for t in types] and "</script><!--" in types[0]["name"]
    assert len(data["points"]["t"]) == s["mentions"] and data["points"]["total"] == s["mentions"]
    assert f"<b>{s['mentions']}</b> mentions &rarr; <b>4</b> types" in page
    assert f'<b id="n-new">{sum(bool(t["new"]) for t in types)}</b>' in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # offline: nothing fetched


def test_the_map_is_a_seeded_sample_and_old_runs_get_a_page(run, tmp_path):
    from eventatlas.discover.page import write_page

    out, s, _, _ = run
    a = write_page(out, tmp_path / "a.html", max_points=5).read_text(encoding="utf-8")
    b = write_page(out, tmp_path / "b.html", max_points=5).read_text(encoding="utf-8")
    assert a == b and len(data_json(a)["points"]["t"]) == 5
    assert f"A seeded sample of 5 of {s['mentions']}" in a
    # a run written before the map and the verdict (no x, y, new, best_link, best_score columns)
    for name, drop in (("assignments", ["x", "y"]), ("types", ["new", "best_link", "best_score"])):
        t = pq.read_table(out / f"{name}.parquet")
        pq.write_table(t.drop_columns(drop), out / f"{name}.parquet")
    old = write_page(out).read_text(encoding="utf-8")
    assert 'id="no-map"' in old and data_json(old)["points"] is None
    assert {c["verdict"] for c in cards(old)} == {"unjudged"} and "no known/new verdict" in old


def turtle_triples(text: str) -> list[tuple[str, str, str]]:
    """The triples of the Turtle the SKOS export writes, checked strictly against the grammar's rules for
    what it uses (prefix lines; subject, then predicate-object lists split by ';' and ended by '.'; IRIs
    without the characters an IRIREF forbids; string literals with only legal escapes, optionally tagged
    or typed); anything else fails."""
    iri = r'<[^<>"{}|^`\\\x00-\x20]*>'
    string = r'"(?:[^"\\\n\r]|\\[tbnrf"\'\\])*"(?:@[a-z]+(?:-[a-z0-9]+)*|\^\^' + iri + r')?'
    token = re.compile(rf"\s*({iri}|{string}|[A-Za-z]+:[A-Za-z]*|a\b|;|\.)", re.S)
    prefixes = {}
    lines = text.split("\n")
    while lines and lines[0].startswith("@prefix"):
        m = re.fullmatch(rf"@prefix ([a-z]+): ({iri}) \.", lines.pop(0))
        assert m, "bad prefix line"
        prefixes[m.group(1)] = m.group(2)
    body, pos, toks = "\n".join(lines), 0, []
    while body[pos:].strip():
        m = token.match(body, pos)
        assert m, f"not Turtle at {body[pos:pos + 80]!r}"
        toks.append(m.group(1))
        pos = m.end()
    triples, i = [], 0

    def pname(t: str) -> bool:
        return ":" in t and not t.startswith(("<", '"')) and t.split(":", 1)[0] in prefixes

    while i < len(toks):
        s = toks[i]
        assert s.startswith("<"), f"a subject must be an IRI: {s}"
        i += 1
        while True:
            p, o, sep = toks[i:i + 3]
            assert p == "a" or pname(p), f"bad predicate {p}"
            assert o.startswith(("<", '"')) or pname(o), f"bad object {o}"
            triples.append((s, "rdf:type" if p == "a" else p, o))
            i += 3
            if sep == ".":
                break
            assert sep == ";", f"expected ';' or '.', got {sep}"
    return triples


def test_the_exports_have_a_row_per_type(run, tmp_path):
    from eventatlas.discover.export import CSV_FIELDS, export, load_run, skos_turtle, type_iri

    out, s, _, _ = run
    types = pq.read_table(out / "types.parquet").to_pylist()
    paths = export(out, ["csv,jsonl", "skos", "csv"], tmp_path / "x")
    assert [p.name for p in paths] == ["types.csv", "types.jsonl", "types.ttl"]
    with open(paths[0], newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_FIELDS and [r["type_id"] for r in rows] == [t["type_id"] for t in types]
    assert [r["triggers"] for r in rows] == ["|".join(t["triggers"]) for t in types]
    assert [r["example"] for r in rows] == [t["examples"][0] for t in types]
    assert [r["new"] for r in rows] == [str(t["new"]).lower() for t in types]
    lines = [json.loads(ln) for ln in paths[1].read_text(encoding="utf-8").splitlines()]
    assert [ln["type_id"] for ln in lines] == [t["type_id"] for t in types]
    for ln in lines:  # every scorer's links, to the known inventory's types
        assert ln["links"] and {r["method"] for r in ln["links"]} == {"centroid", "mnn", "vote"}
        assert all(r["target"].startswith("mini_events::") for r in ln["links"]) and ln["run_id"] == out.name
    triples = turtle_triples(paths[2].read_text(encoding="utf-8"))
    concepts = [t for t, p, o in triples if (p, o) == ("rdf:type", "skos:Concept")]
    assert concepts == [type_iri(out.name, t["type_id"]) for t in types]
    assert sum((p, o) == ("rdf:type", "skos:ConceptScheme") for _, p, o in triples) == 1
    labels = {t: o for t, p, o in triples if p == "skos:prefLabel"}
    assert labels[concepts[0]] == json.dumps(types[0]["name"], ensure_ascii=False) + "@en"
    # known -> skos:closeMatch its best link; new -> skos:relatedMatch (the nearest, but far); both checked by
    # flipping the verdicts of a loaded run
    run_ = load_run(out)
    for t, new in zip(run_["types"], [False, True, False, True]):
        t["new"] = new
    triples = turtle_triples(skos_turtle(run_))
    close = {(s_, o) for s_, p, o in triples if p == "skos:closeMatch"}
    related = {(s_, o) for s_, p, o in triples if p == "skos:relatedMatch"}
    iri = lambda t: f"<urn:eventatlas:node:{t['best_link'].replace(':', '%3A')}>"  # noqa: E731
    assert close == {(type_iri(out.name, t["type_id"]), iri(t)) for t in run_["types"] if not t["new"]}
    assert related == {(type_iri(out.name, t["type_id"]), iri(t)) for t in run_["types"] if t["new"]}
    # an odd run id and type id stay inside their IRIs
    assert type_iri('a b>"{x}', "t<1>") == "<urn:eventatlas:discover:a%20b%3E%22%7Bx%7D/t%3C1%3E>"
    with pytest.raises(ValueError, match="--format 'pdf'"):
        export(out, ["csv,pdf"])


@NEEDS_CHROMIUM
def test_the_page_in_headless_chromium(run, tmp_path):
    """In a real browser: the cards, the map's points, the filter and the selection driven by the address."""
    out, s, path, _ = run
    page = path.read_text(encoding="utf-8")
    got = cards(page)
    dom = dump_dom(CHROMIUM, path, "", tmp_path)
    assert dom.count('<article class="card"') == 4 and 'data-shown="4"' in dom
    assert re.search(r'<svg id="map"[^>]*data-points="%d"' % s["mentions"], dom)
    assert dom.count("<circle") == s["mentions"] and "<b>bold</b>" not in dom
    # the filter: a type's first trigger; the cards whose text holds it stay, the others are hidden
    word = got[1]["search"].split()[1]
    want = [c["type"] for c in got if word in c["search"]]
    dom = dump_dom(CHROMIUM, path, "#q=" + quote(word, safe=""), tmp_path)
    shown = re.findall(r'<article class="card[^"]*" id="type-(t\d+)"(?![^>]*hidden)', dom)
    assert shown == want and f'data-shown="{len(want)}"' in dom and len(want) < 4
    assert re.search(r'<g fill="[^"]+" data-t="\d" class="off">', dom)  # the hidden types' points are dimmed
    dom = dump_dom(CHROMIUM, path, "#new=1", tmp_path)
    shown = re.findall(r'<article class="card[^"]*" id="type-(t\d+)"(?![^>]*hidden)', dom)
    assert shown == ["t2", "t4"] and 'data-shown="2"' in dom
    dom = dump_dom(CHROMIUM, path, "?type=t2", tmp_path)  # a query works as the fragment does
    assert 'data-selected="t2"' in dom and re.search(r'<article class="card sel[^"]*" id="type-t2"', dom)
    assert re.search(r'<svg id="map"[^>]*class="focus"', dom)


def test_the_command_writes_the_page_and_exports_a_finished_run(eventatlas_env, tmp_path):
    from eventatlas import config
    from eventatlas.cli import app

    write_mini_events(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    r = CliRunner().invoke(app, ["discover", "mini_events", "--k", "3", "--encoder", str(model), "--device", "cpu",
                                 "--link-to", "mini_events", "--format", "csv,skos", "-o", str(tmp_path / "x")],
                           terminal_width=300)
    assert r.exit_code == 0, r.output
    (run_dir,) = config.runs_dir().glob("discover-mini_events-*")
    assert f"{run_dir / 'page.html'}" in r.output and (run_dir / "page.html").exists()
    assert f"exported: {tmp_path / 'x' / 'types.csv'}, {tmp_path / 'x' / 'types.ttl'}" in r.output
    # the verdicts, counted and per card, as the types table has them
    import pyarrow.parquet as pq

    types = pq.read_table(run_dir / "types.parquet").to_pylist()
    n_new = sum(bool(t["new"]) for t in types)
    assert (f"{n_new} of 3 types new (new: no link to mini_events with a vote raw score of 0.25 or more)"
            in r.output)
    assert r.output.count("  NEW\n") == n_new and r.output.count("  known\n") == 3 - n_new
    r = CliRunner().invoke(app, ["discover", "--from-run", run_dir.name, "--format", "jsonl", "--format", "html",
                                 "-o", str(tmp_path / "y")], terminal_width=300)
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "y" / "types.jsonl").read_text().splitlines()) == 3
    same = (tmp_path / "y" / "page.html").read_text(encoding="utf-8")
    assert same == (run_dir / "page.html").read_text(encoding="utf-8")
    for args, said in ((["--from-run", run_dir.name, "mini_events"], "give no DATASET"),
                       (["--from-run", "nope"], "unknown run 'nope'"),
                       (["mini_events", "--format", "pdf"], "--format 'pdf': use one of html, csv, jsonl, skos"),
                       ([], "give a DATASET")):
        bad = CliRunner().invoke(app, ["discover", *args], terminal_width=300)
        assert bad.exit_code == 2 and said in bad.output, bad.output
    cluster_run = config.runs_dir() / "cluster-x"
    cluster_run.mkdir()
    bad = CliRunner().invoke(app, ["discover", "--from-run", "cluster-x"], terminal_width=300)
    assert bad.exit_code == 2 and "not a discover run" in bad.output


def test_the_report_lists_discover_runs_with_their_pages(eventatlas_env, tmp_path):
    from eventatlas import config
    from eventatlas.pipelines.discover import discover
    from eventatlas.pipelines.local import engine
    from eventatlas.results.report import write_report
    from eventatlas.store.warehouse import Warehouse

    wh = Warehouse()
    wh.migrate()
    wh.refresh_views()
    assert 'id="discovered"' not in write_report(tmp_path / "empty.html").read_text(encoding="utf-8")
    write_mini_events(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    s = discover("mini_events", k=3, link_to=["mini_events"], encoder=str(model), device="cpu", engine=engine())
    assert s["page"] == str(config.runs_dir() / s["run_id"] / "page.html")
    out = write_report(tmp_path / "r" / "report.html")
    html = out.read_text(encoding="utf-8")
    row = re.search(rf'<tr data-run="{s["run_id"]}">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[1:4] == ["mini_events", "3", str(s["new"])]
    href = re.search(r'href="([^"]+)"', cells[4]).group(1)
    assert (out.parent / href).resolve() == (config.runs_dir() / s["run_id"] / "page.html").resolve()
