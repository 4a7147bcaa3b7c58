"""A self-written mini world of event mentions: 5 event types, 6-7 sentences each, one trigger a sentence,
and a tiny random BERT whose vocabulary covers it."""
from __future__ import annotations

from pathlib import Path

from eventatlas.io import DatasetWriter
from support.tiny_models import tiny_bert

SENTENCES = {
    "Conflict.Attack": ["Rebels attacked the convoy near the border .", "The army attacked the village at dawn .",
                        "Gunmen attacked a police station in the city .", "Militants attacked the base overnight .",
                        "Troops attacked the rebel positions on the hill .", "Pirates attacked a cargo ship at sea .",
                        "Insurgents attacked the checkpoint with rockets ."],
    "Life.Death": ["The former president died in hospital on Monday .", "Three miners died after the collapse .",
                   "The actor died of a heart attack at home .", "Two climbers died on the mountain .",
                   "The poet died in exile in Paris .", "Dozens died in the flood last week .",
                   "The king died after a long illness ."],
    "Contact.Meet": ["The ministers met in Geneva to discuss trade .", "The leaders met at the summit .",
                     "Officials met with union representatives .", "The two presidents met privately .",
                     "Delegates met in Vienna for talks .", "The envoy met the rebel commander ."],
    "Movement.Transport": ["The refugees were moved to a camp .", "Supplies were transported by truck .",
                           "The prisoners were moved to another jail .", "Troops were transported by air .",
                           "The goods were shipped to the port .", "Aid was carried to the villages ."],
    "Personnel.Elect": ["Voters elected a new mayor on Sunday .", "The parliament elected a speaker .",
                        "She was elected governor in 2010 .", "The board elected a new chairman .",
                        "Citizens elected the council members .", "He was elected president twice ."],
}
TRIGGERS = {"Conflict.Attack": "attacked", "Life.Death": "died", "Contact.Meet": "met",
            "Movement.Transport": ("moved", "transported", "shipped", "carried"), "Personnel.Elect": "elected"}


def write_mini_events(root: Path, name: str = "mini_events", types=None, every: int = 1) -> Path:
    out = root / "datasets" / name
    with DatasetWriter(out, name) as w:
        for t, sents in SENTENCES.items():
            if types is not None and t not in types:
                continue
            w.write("event_types", {"dataset": name, "type_id": t, "name": t.split(".")[1].lower(),
                                    "ontology": "other"})
            for i, s in enumerate(sents):
                if i % every:
                    continue
                trig = TRIGGERS[t] if isinstance(TRIGGERS[t], str) else next(x for x in TRIGGERS[t] if x in s)
                a = s.index(trig)
                w.write("mentions", {"mention_id": f"{t}-{i}", "dataset": name, "doc_id": f"d{t}{i}",
                                     "sent_idx": 0, "sentence": s, "trigger_start": a, "trigger_end": a + len(trig),
                                     "trigger": trig, "labels": [t], "split": "all"})
        w.commit({"reader": "sample"})
    return out


def mini_tiny_bert(root: Path) -> Path:
    """A 1-layer random BERT over the mini world's words and type names (``root/tiny_bert``)."""
    return tiny_bert(root, [s for ss in SENTENCES.values() for s in ss] + [t.split(".")[1].lower() for t in SENTENCES])
