"""One discover run as one offline HTML page (``page.html`` in the run directory).

The page (:data:`PAGE`: inline CSS, SVG and JavaScript, no network, like the atlas page): a
header (dataset, mentions, types, how their count was chosen, the inventories linked, how many types are
new), one card per type (name, size, top triggers with counts, example sentences with the trigger marked,
a NEW / known badge, and per linked inventory its top targets by the novelty scorer with calibrated and raw
score and an evidence sentence from each side), a 2-D map of the mentions coloured by type (the run's PCA
coordinates; at most :data:`MAX_POINTS`, a seeded sample) and a search box with a "new only" toggle.
Hovering or clicking a point or a card highlights its type. ``#q=<text>&new=1&type=<type id>`` in the
address (or the same as a ``?`` query) sets the search, the toggle and the selected type on load, so a
view can be shared, and it is how the headless-browser test drives the page.

Cards are written as HTML here, every value escaped (:func:`eventatlas.escaping.html_text`, so a sentence
holding ``<script>`` is shown as text); the map's points travel as JSON in a ``<script type="application/json">``
element (:func:`eventatlas.escaping.script_json`). Runs written before the map or the known/new verdict existed
(no ``x``/``y`` or ``new`` columns) get a page without them.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..escaping import html_text, script_json

PAGE_NAME = "page.html"
MAX_POINTS = 5000  # the map's sample: enough to see the shape, small enough for a page (~100 KB of points)
TOP_TARGETS = 3    # targets shown per type and linked inventory
MAX_EXAMPLES = 5
_BRACKETED = re.compile(r"\[([^\[\]]+)\]")


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def _read(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [{k: _clean(v) for k, v in r.items()} for r in pq.read_table(path).to_pylist()] if path.exists() else []


def type_of_node(node: str) -> str:
    """The type id of a node id ``<inventory>::<type>``."""
    return node.rsplit("::", 1)[-1]


def inventory_of_node(node: str) -> str:
    return node.rsplit("::", 1)[0] if "::" in node else ""


def mention_texts(dataset_dirs: Iterable[Path], ids: Iterable[str]) -> dict[str, tuple[str, int, int, str]]:
    """mention id -> (sentence, trigger start, trigger end, dataset name), read from the ``mentions`` tables of
    ``dataset_dirs`` (the first that has it wins; datasets without the table are skipped)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    want = pa.array(sorted(set(ids)), pa.string())
    out: dict[str, tuple[str, int, int, str]] = {}
    for d in dataset_dirs:
        path = Path(d) / "mentions.parquet"
        if not len(want) or not path.exists():
            continue
        t = pq.read_table(path, columns=["mention_id", "sentence", "trigger_start", "trigger_end"])
        for r in t.filter(pc.is_in(t["mention_id"], value_set=want)).to_pylist():
            if r["sentence"] is not None and r["trigger_start"] is not None:
                out.setdefault(r["mention_id"], (r["sentence"], r["trigger_start"], r["trigger_end"], Path(d).name))
    return out


def load_run(run_dir: str | Path, datasets_dir: str | Path | None = None) -> dict[str, Any]:
    """A discover run's files: ``summary`` (discover.json), ``types`` and ``links`` as rows (no links when
    the run linked nothing), ``assignments`` (:func:`_coordinates`) and ``texts`` (:func:`mention_texts` of
    the examples' and the evidence's mentions, from the run's dataset and the datasets it linked to, under
    ``datasets_dir``, default the data root's)."""
    from .. import config
    from ..errors import InputError

    run = Path(run_dir)
    if not (run / "discover.json").exists() or not (run / "types.parquet").exists():
        raise InputError(run / "discover.json", "file", f"{run.name} is not a discover run (no discover.json or "
                                                         "types.parquet)")
    summary = json.loads((run / "discover.json").read_text(encoding="utf-8"))
    types, links = _read(run / "types.parquet"), _read(run / "links.parquet")
    base = Path(datasets_dir) if datasets_dir is not None else config.datasets_dir()
    dirs = [base / summary["dataset"]] + [base / n for n in summary.get("linked_to") or [] if (base / n).is_dir()]
    ids = [m for t in types for m in t.get("medoid_ids") or []]
    ids += [m for r in links for m in (r.get("evidence_mention_ids") or [])[:4]]
    return {"run_id": run.name, "dir": run, "summary": summary, "types": types, "links": links,
            "assignments": _coordinates(run / "assignments.parquet"), "texts": mention_texts(dirs, ids)}


def _coordinates(path: Path) -> dict[str, np.ndarray]:
    """The assignments' type ids and map coordinates as arrays (a corpus's worth of rows: no Python dicts);
    without ``x``/``y`` (runs written before the map), type ids only."""
    import pyarrow.parquet as pq

    if not path.exists():
        return {"type_id": np.array([], dtype=object)}
    cols = [c for c in ("type_id", "x", "y") if c in pq.read_schema(path).names]
    t = pq.read_table(path, columns=cols)
    return {c: t[c].to_numpy(zero_copy_only=False) for c in cols}


def colours(n: int) -> list[str]:
    """``n`` distinct hues (golden-angle steps), the same for a type's card and its points."""
    return [f"hsl({(i * 137.508) % 360:.0f},62%,{44 if i % 2 else 38}%)" for i in range(n)]


def _marked(example: str, mention: tuple[str, int, int, str] | None) -> dict[str, str]:
    """An example split around its trigger (pre, trigger, post): from the mention's offsets when it resolves,
    else from the first [bracketed] span of the example text, else the text as is."""
    if mention is not None:
        s, a, b, _ = mention
        return {"pre": s[:a], "trigger": s[a:b], "post": s[b:]}
    m = _BRACKETED.search(example)
    if m is None:
        return {"pre": example, "trigger": "", "post": ""}
    return {"pre": example[:m.start()], "trigger": m.group(1), "post": example[m.end():]}


def _num(v: Any, digits: int = 3) -> str:
    return "" if v is None else f"{float(v):.{digits}f}"


def _links_of(rows: list[dict[str, Any]], scorer: str, texts: Mapping[str, tuple], dataset: str) -> list[dict]:
    """One type's links, per target inventory: the top :data:`TOP_TARGETS` of ``scorer`` with their scores
    and evidence, and the first target of every other scorer."""
    out = []
    for inv in sorted({inventory_of_node(r["target"]) for r in rows}):
        mine = [r for r in rows if inventory_of_node(r["target"]) == inv]
        top = sorted((r for r in mine if r["method"] == scorer), key=lambda r: (r.get("rank") or 0, r["target"]))
        targets = []
        for r in top[:TOP_TARGETS]:
            ev = [texts[m] for m in r.get("evidence_mention_ids") or [] if m in texts]
            ours = next((e for e in ev if e[3] == dataset), None)
            theirs = next((e for e in ev if e[3] != dataset), None)
            targets.append({"target": type_of_node(r["target"]), "node": r["target"], "rank": r.get("rank"),
                            "score": _num(r.get("score")), "raw": _num(r.get("raw_score")),
                            "calibration": r.get("calibration") or "",
                            "evidence": [{"side": side, **_marked("", e)}
                                         for side, e in (("ours", ours), ("theirs", theirs)) if e is not None]})
        others = []
        for m in sorted({r["method"] for r in mine} - {scorer}):
            best = min((r for r in mine if r["method"] == m), key=lambda r: (r.get("rank") or 0, r["target"]))
            others.append({"method": m, "target": type_of_node(best["target"]), "raw": _num(best.get("raw_score"))})
        out.append({"inventory": inv, "targets": targets, "others": others})
    return out


def _points(assignments: Mapping[str, np.ndarray], index: Mapping[str, int], seed: int,
            max_points: int) -> dict[str, Any] | None:
    """The map's points, scaled to a 1000 x 700 box (y up): x, y and the type's index, a seeded sample of at
    most ``max_points``; None when the run has no coordinates."""
    if "x" not in assignments:
        return None
    t = np.array([index.get(str(v), -1) for v in assignments["type_id"]], dtype=np.int64)
    xy = np.stack([assignments["x"], assignments["y"]], axis=1).astype(np.float64)
    rows = np.flatnonzero((t >= 0) & np.isfinite(xy).all(axis=1))
    if not len(rows):
        return None
    if len(rows) > max_points:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=max_points, replace=False))
    xy = xy[rows]
    lo, span = xy.min(axis=0), np.ptp(xy, axis=0)
    span[span == 0] = 1.0
    unit = (xy - lo) / span
    return {"x": np.rint(20 + 960 * unit[:, 0]).astype(int).tolist(),
            "y": np.rint(680 - 660 * unit[:, 1]).astype(int).tolist(),
            "t": t[rows].tolist(), "total": len(t), "shown": len(rows)}


def view(run: Mapping[str, Any], max_points: int = MAX_POINTS) -> dict[str, Any]:
    """What the page shows of a loaded run (:func:`load_run`): its header's facts, its cards, its points."""
    s, types, texts = run["summary"], run["types"], run["texts"]
    cfg = s.get("config") or {}
    scorer = cfg.get("novelty_scorer") or "centroid"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in run["links"]:
        if r.get("kind", "learned") == "learned":
            by_type.setdefault(type_of_node(r["source"]), []).append(r)
    palette, n_mentions = colours(len(types)), max(int(s.get("mentions") or 0), 1)
    index = {t["type_id"]: i for i, t in enumerate(types)}
    cards = []
    for i, t in enumerate(types):
        examples = [_marked(e, texts.get(m) if m else None)
                    for e, m in zip(t.get("examples") or [], list(t.get("medoid_ids") or []) + [None] * MAX_EXAMPLES)]
        triggers = list(zip(t.get("triggers") or [], t.get("trigger_counts") or []))
        new = t.get("new")
        best = t.get("best_link")
        search = " ".join([t["type_id"], t.get("name") or "", *(f for f, _ in triggers), *(t.get("examples") or []),
                           type_of_node(best) if best else ""]).lower()
        cards.append({"type_id": t["type_id"], "index": i, "colour": palette[i], "name": t.get("name") or t["type_id"],
                      "size": t.get("size") or 0, "share": f"{100 * (t.get('size') or 0) / n_mentions:.1f}",
                      "cohesion": _num(t.get("cohesion")), "triggers": triggers, "examples": examples[:MAX_EXAMPLES],
                      "majority": t.get("majority_label"), "new": new,
                      "verdict": ("unjudged" if t["type_id"] in by_type else "unlinked") if new is None
                      else "new" if new else "known",
                      "best": type_of_node(best) if best else None, "best_node": best,
                      "best_score": _num(t.get("best_score")), "search": search,
                      "links": _links_of(by_type.get(t["type_id"], []), scorer, texts, s.get("dataset", ""))})
    points = _points(run["assignments"], index, int(cfg.get("seed") or 0), max_points)
    judged = any(c["new"] is not None for c in cards)
    return {"run_id": run["run_id"], "dataset": s.get("dataset", ""), "mentions": s.get("mentions"),
            "n_types": len(types), "how": str(s.get("how", "")).split(": ", 1)[-1],  # without its "<k> types: "
            "linked_to": s.get("linked_to") or [],
            "n_new": sum(bool(c["new"]) for c in cards) if judged else None, "judged": judged,
            "scorer": scorer, "new_below": cfg.get("new_below"), "algorithm": cfg.get("algorithm"),
            "encoder": cfg.get("encoder") or "default encoder", "representation": cfg.get("representation"),
            "cards": cards, "points": points,
            "legend": [{"type_id": c["type_id"], "name": c["name"], "colour": c["colour"]} for c in cards]}


BADGES = {"new": "NEW", "known": "known", "unlinked": "unlinked", "unjudged": "not judged"}

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Discovered types: __TITLE__</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
[hidden]{display:none!important}
header.top{padding:16px 24px 8px;background:#fff;border-bottom:1px solid #ddd}
h1{font-size:21px;margin:0 0 6px}.facts{margin:2px 0}.muted,.note{color:#666}.note{font-size:12px}
.tools{position:sticky;top:0;z-index:2;background:#fff;padding:8px 24px;border-bottom:1px solid #ddd;display:flex;gap:16px;align-items:center}
#q{width:360px;padding:5px 8px;font-size:14px}
main{display:flex;gap:18px;padding:14px 24px;align-items:flex-start}
#cards{flex:1 1 0;min-width:0;display:flex;flex-direction:column;gap:10px}
#side{flex:0 0 46%;position:sticky;top:52px}
#map{width:100%;background:#fff;border:1px solid #ddd;border-radius:6px}
#map g.off{opacity:.06}#map.focus g{opacity:.1}#map.focus g.on{opacity:1}#map circle{cursor:pointer}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:2px 6px;border-radius:3px;font-size:12px}
.card{background:#fff;border:1px solid #ddd;border-left:6px solid var(--c);border-radius:6px;padding:8px 12px}
.card.sel{box-shadow:0 0 0 2px var(--c)}.card.hl{background:#fdfdf3}
.card .head{display:flex;gap:8px;align-items:baseline;cursor:pointer}
.card h2{font-size:16px;margin:0}.tid{color:#888;font-size:12px;font-family:ui-monospace,monospace}
.badge{margin-left:auto;font-size:11px;font-weight:700;padding:1px 7px;border-radius:9px;white-space:nowrap}
.badge.new{background:#fde2d0;color:#9a3b00}.badge.known{background:#dcefe0;color:#1e6b34}.badge.unlinked,.badge.unjudged{background:#eee;color:#666}
.meta{margin:2px 0;color:#555;font-size:13px}.trig span{display:inline-block;background:#f1f1f6;border-radius:3px;padding:0 5px;margin:1px 2px}
.trig small{color:#777}ol.ex{margin:4px 0;padding-left:20px}ol.ex li{margin:2px 0}
mark{background:#ffe98a;padding:0 1px;border-radius:2px}
table.links{border-collapse:collapse;font-size:12.5px;margin:4px 0}table.links td,table.links th{padding:1px 8px 1px 0;text-align:left}
table.links td.num{text-align:right;font-variant-numeric:tabular-nums}.inv{font-weight:600;margin-top:6px;font-size:13px}
#legend{list-style:none;padding:0;margin:6px 0;columns:2;font-size:12.5px}#legend li{cursor:pointer;break-inside:avoid}
#legend li.off{opacity:.35}#legend li.hl{font-weight:700}#legend small{color:#888}
.sw{display:inline-block;width:10px;height:10px;border-radius:5px;vertical-align:middle}
details.ev{font-size:12.5px;color:#444}details.ev div{margin:2px 0 2px 12px}.side-tag{color:#888;font-size:11px}
</style></head><body>
__HEADER__
<main>
<section id="cards">
__CARDS__
</section>
<aside id="side">
__SIDE__
</aside>
</main>
<div id="tip" hidden></div>
<script id="data" type="application/json">__DATA__</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
const NS = 'http://www.w3.org/2000/svg', svg = document.getElementById('map'), tip = document.getElementById('tip');
const cards = [...document.querySelectorAll('.card')], q = document.getElementById('q'), newonly = document.getElementById('newonly');
const groups = [], legend = [...document.querySelectorAll('#legend li')];
let selected = null;
function drawMap() {
  if (!svg || !D.points) return;
  const P = D.points;
  for (let i = 0; i < D.types.length; i++) {  // one group per type: highlighting touches a group, not every dot
    const g = document.createElementNS(NS, 'g'); g.setAttribute('fill', D.types[i].colour); g.dataset.t = i;
    groups.push(g); svg.appendChild(g);
  }
  for (let i = 0; i < P.t.length; i++) {
    const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', P.x[i]); c.setAttribute('cy', P.y[i]); c.setAttribute('r', P.t.length > 2000 ? 3 : P.t.length > 500 ? 5 : 7);
    groups[P.t[i]].appendChild(c);
  }
  svg.dataset.points = P.t.length;
  svg.onmouseover = e => { if (e.target.tagName !== 'circle') return; const t = +e.target.parentNode.dataset.t;
    highlight(t); tip.textContent = D.types[t].type_id + ': ' + D.types[t].name; tip.hidden = false; };
  svg.onmousemove = e => { tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 8) + 'px'; };
  svg.onmouseout = () => { tip.hidden = true; highlight(selected); };
  svg.onclick = e => { if (e.target.tagName === 'circle') select(+e.target.parentNode.dataset.t, true); };
}
function highlight(t) {
  if (svg) svg.classList.toggle('focus', t !== null);
  groups.forEach((g, i) => g.classList.toggle('on', i === t));
  cards.forEach((c, i) => c.classList.toggle('hl', i === t));
  legend.forEach((l, i) => l.classList.toggle('hl', i === t));
}
function select(t, scroll) {
  selected = selected === t ? null : t;
  cards.forEach((c, i) => c.classList.toggle('sel', i === selected));
  document.body.dataset.selected = selected === null ? '' : cards[selected].dataset.type;
  highlight(selected);
  if (selected !== null && scroll) cards[selected].scrollIntoView({block: 'nearest'});
  save();
}
function apply() {
  const terms = q.value.trim().toLowerCase().split(/\s+/).filter(Boolean), only = newonly.checked;
  let n = 0;
  cards.forEach((c, i) => {
    const ok = terms.every(w => c.dataset.search.includes(w)) && (!only || c.dataset.verdict === 'new');
    c.hidden = !ok; n += ok;
    if (groups[i]) { groups[i].classList.toggle('off', !ok); legend[i].classList.toggle('off', !ok); }
  });
  document.getElementById('count').textContent = `${n} of ${cards.length} types shown`;
  document.body.dataset.shown = n;
  save();
}
function save() {  // the view in the address, to share it
  const p = new URLSearchParams();
  if (q.value.trim()) p.set('q', q.value.trim());
  if (newonly.checked) p.set('new', '1');
  if (selected !== null) p.set('type', cards[selected].dataset.type);
  const h = p.toString();
  try { history.replaceState(null, '', h ? '#' + h : location.pathname + location.search); } catch (e) { /* a sandboxed frame */ }
}
function load() {
  const p = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
  q.value = p.get('q') || ''; newonly.checked = p.get('new') === '1' && !newonly.disabled;
  selected = null; apply();
  const c = cards.find(c => c.dataset.type === p.get('type'));
  if (c) select(+c.dataset.index, true); else highlight(null);
}
cards.forEach((c, i) => {
  c.onmouseenter = () => highlight(i); c.onmouseleave = () => highlight(selected);
  c.querySelector('.head').onclick = () => select(i, false);
});
legend.forEach((l, i) => { l.onmouseenter = () => highlight(i); l.onmouseleave = () => highlight(selected);
  l.onclick = () => select(i, true); });
q.oninput = apply; newonly.onchange = apply; window.onhashchange = load;
drawMap(); load();
</script></body></html>
"""


def _marked_html(e: Mapping[str, str]) -> str:
    return f"{html_text(e['pre'])}<mark>{html_text(e['trigger'])}</mark>{html_text(e['post'])}"


def _header_html(v: Mapping[str, Any]) -> str:
    h = html_text
    if not v["linked_to"]:
        linked = "Not linked to any known inventory (<code>--link-to</code>), so no type is judged new or known."
    elif v["judged"]:
        linked = (f"Linked to <b>{h(', '.join(v['linked_to']))}</b>: <b id=\"n-new\">{v['n_new']}</b> of "
                  f"{v['n_types']} types are <span class=\"badge new\">NEW</span> (their best {h(v['scorer'])} "
                  f"link's raw score is under {h(v['new_below'])}), the others <span class=\"badge known\">known"
                  "</span>.")
    else:
        linked = (f"Linked to <b>{h(', '.join(v['linked_to']))}</b>: no known/new verdict (this run was written "
                  "before there was one).")
    disabled = "" if v["judged"] else " disabled"
    return (f'<header class="top">\n<h1>Discovered event types: {h(v["dataset"])}</h1>\n'
            f'<p class="facts"><b>{int(v["mentions"] or 0):,}</b> mentions &rarr; <b>{v["n_types"]}</b> types. '
            f'<span class="muted" id="how">{h(v["how"])}</span></p>\n<p class="facts">{linked}</p>\n'
            f'<p class="note">Run <code>{h(v["run_id"])}</code>; {h(v["algorithm"])} clustering of '
            f'{h(v["representation"])} embeddings ({h(v["encoder"])}). Scores: <i>score</i> is calibrated, '
            "<i>raw</i> the scorer's own value.</p>\n</header>\n"
            '<div class="tools"><input id="q" type="search" placeholder="filter by name, trigger or example text" '
            f'autocomplete="off">\n<label><input type="checkbox" id="newonly"{disabled}> new only</label>'
            '<span id="count" class="muted"></span></div>')


def _links_html(inv: Mapping[str, Any], scorer: str) -> list[str]:
    h = html_text
    out = [f'<div class="inv">in {h(inv["inventory"])}</div>',
           f'<table class="links" data-inventory="{h(inv["inventory"])}"><tr><th>{h(scorer)} target</th>'
           "<th>score</th><th>raw</th></tr>"]
    out += [f'<tr class="link"><td>{h(t["rank"])}. {h(t["target"])}</td><td class="num" title="{h(t["calibration"])}">'
            f'{h(t["score"])}</td><td class="num">{h(t["raw"])}</td></tr>' for t in inv["targets"]]
    out.append("</table>")
    if inv["others"]:
        out.append('<div class="note">first by the other scorers: ' + "; ".join(
            f'{h(o["method"])} &rarr; {h(o["target"])} ({h(o["raw"])})' for o in inv["others"]) + "</div>")
    evidence = [f'<div><span class="side-tag">{h(t["target"])}, '
                f'{"this corpus" if e["side"] == "ours" else h(inv["inventory"])}:</span> {_marked_html(e)}</div>'
                for t in inv["targets"] for e in t["evidence"]]
    if evidence:
        out.append('<details class="ev"><summary>evidence</summary>\n' + "\n".join(evidence) + "\n</details>")
    return out


def _card_html(c: Mapping[str, Any], scorer: str) -> str:
    h = html_text
    meta = f'<span class="size">{c["size"]:,}</span> mentions ({c["share"]}%) &middot; cohesion {h(c["cohesion"])}'
    if c["majority"]:
        meta += f" &middot; gold majority: {h(c['majority'])}"
    if c["best"]:
        meta += f" &middot; best link: <b>{h(c['best'])}</b> ({h(scorer)} raw {h(c['best_score'])})"
    out = [f'<article class="card" id="type-{h(c["type_id"])}" style="--c:{h(c["colour"])}" '
           f'data-type="{h(c["type_id"])}" data-index="{c["index"]}" data-verdict="{h(c["verdict"])}" '
           f'data-size="{c["size"]}" data-search="{h(c["search"])}">',
           f'<div class="head"><span class="tid">{h(c["type_id"])}</span><h2>{h(c["name"])}</h2>'
           f'<span class="badge {h(c["verdict"])}">{BADGES[c["verdict"]]}</span></div>',
           f'<p class="meta">{meta}</p>',
           '<p class="trig">' + "".join(f"<span>{h(f)} <small>&times;{n}</small></span>" for f, n in c["triggers"])
           + "</p>",
           '<ol class="ex">' + "".join(f"<li>{_marked_html(e)}</li>" for e in c["examples"]) + "</ol>"]
    for inv in c["links"]:
        out += _links_html(inv, scorer)
    out.append("</article>")
    return "\n".join(out)


def _side_html(v: Mapping[str, Any]) -> str:
    pts = v["points"]
    if not pts:
        return ('<p class="muted" id="no-map">No map: this run has no 2-D coordinates of its mentions (it was '
                "written before they were).</p>")
    sample = f"A seeded sample of {pts['shown']:,} of {pts['total']:,}. " if pts["shown"] < pts["total"] else ""
    legend = "\n".join(f'<li data-index="{c["index"]}"><span class="sw" style="background:{html_text(c["colour"])}">'
                       f'</span> {html_text(c["type_id"])} {html_text(c["name"])} <small>{c["size"]:,}</small></li>'
                       for c in v["cards"])
    return ('<svg id="map" viewBox="0 0 1000 700" role="img" aria-label="map of the mentions"></svg>\n'
            '<p class="note">Each dot is a mention (the first two principal components of its embedding), coloured '
            f"by its type. {sample}Hover a dot, a card or a legend entry to see its type; click to select it.</p>\n"
            f'<ul id="legend">\n{legend}\n</ul>')


def html_page(run: Mapping[str, Any], max_points: int = MAX_POINTS) -> str:
    """The page of a loaded run (:func:`load_run`) as one HTML string: every value from the run escaped
    (:func:`eventatlas.escaping.html_text`; the map's data by :func:`eventatlas.escaping.script_json`, so
    nothing in it can end or hide its script element)."""
    v = view(run, max_points)
    data = script_json({"points": v["points"], "types": v["legend"]}, allow_nan=False)
    parts = {"__TITLE__": html_text(v["dataset"]), "__HEADER__": _header_html(v),
             "__CARDS__": "\n".join(_card_html(c, v["scorer"]) for c in v["cards"]), "__SIDE__": _side_html(v)}
    page = PAGE
    for key, text in parts.items():  # filled one by one; the data last, so no placeholder inside it is read
        page = page.replace(key, text, 1)
    return page.replace("__DATA__", data, 1)


def write_page(run_dir: str | Path, out: str | Path | None = None, *, datasets_dir: str | Path | None = None,
               max_points: int = MAX_POINTS) -> Path:
    """Write the page of the discover run in ``run_dir`` (atomically) to ``out`` (default
    ``<run_dir>/page.html``); returns its path."""
    from ..io import atomic_write_text

    path = Path(out) if out is not None else Path(run_dir) / PAGE_NAME
    atomic_write_text(path, html_page(load_run(run_dir, datasets_dir), max_points))
    return path
