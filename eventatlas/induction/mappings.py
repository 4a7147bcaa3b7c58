"""Derive event-type -> FrameNet frame mappings where type names are frame names.

MAVEN's 168 types were taken from FrameNet frames, so most names match a frame after
normalisation (case, ``-``/space -> ``_``). OntoEvent types are ``Supertype.Type`` with MAVEN's
type as the last part. Hand additions (types whose frame was renamed or merged) are listed in
``HAND`` with a reason and are written with provenance ``hand``.

Regenerate the shipped TSVs (needs ../shared/data or the user's copies):
``python -m eventatlas.induction.mappings <framenet17 dir> <maven_definition.json> <ontoevent dir> <out dir>``
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Iterable

# type (normalised) -> (frames, why); checked against FrameNet 1.7 frame names when written
HAND: dict[str, tuple[list[str], str]] = {
    "achieve": (["Accomplishment"], "MAVEN Achieve = accomplishing a goal"),
    "action": (["Intentionally_act"], "MAVEN Action = doing something intentionally"),
    "award": (["Giving", "Rewards_and_punishments"], "awarding = giving a prize; reward frame"),
    "bodily_harm": (["Cause_harm", "Experience_bodily_harm"], "as the ACE Injure mapping of the paper"),
    "change": (["Cause_change", "Undergo_change"], "agentive and non-agentive change"),
    "change_sentiment": (["Emotion_directed"], "change of feeling towards something; no Change_of_sentiment frame"),
    "check": (["Verification", "Inspecting"], "checking = verifying / inspecting"),
    "connect": (["Attaching", "Make_cognitive_connection"], "physical and mental connecting"),
    "convincing": (["Suasion"], "convince.v is a lexical unit of Suasion"),
    "cost": (["Expensiveness"], "cost.v is a lexical unit of Expensiveness"),
    "create_artwork": (["Create_physical_artwork"], "renamed frame"),
    "employment": (["Being_employed", "Employing"], "state and act of employing"),
    "getready": (["Activity_prepare"], "get ready = prepare for an activity"),
    "giveup": (["Activity_stop", "Surrendering_possession", "Quitting"], "give up an activity / possession / job"),
    "hold": (["Manipulation"], "hold.v is a lexical unit of Manipulation"),
    "incident": (["Event"], "incident.n is a lexical unit of Event"),
    "influence": (["Objective_influence", "Subjective_influence"], "MAVEN Influence; FN splits the two"),
    "know": (["Awareness"], "know.v is a lexical unit of Awareness"),
    "lighting": (["Light_movement", "Location_of_light"], "emission/location of light"),
    "recovering": (["Recovery"], "FrameNet 1.7 name is Recovery"),
    "risk": (["Run_risk", "Risky_situation"], "running a risk / a risky situation"),
    "testing": (["Operational_testing", "Examination"], "testing a device / examining a person"),
    "traveling": (["Travel"], "FrameNet 1.7 name is Travel"),
    "writing": (["Text_creation"], "write.v is a lexical unit of Text_creation"),
}


def norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def derive(type_names: Iterable[str], frame_names: Iterable[str], *, last_part: bool = False) -> list[tuple[str, list[str], str]]:
    """[(type, frames, provenance)] for every type that maps; exact/normalised matches first."""
    frames = {norm(f): f for f in frame_names}
    out = []
    for t in type_names:
        key = norm(t.rsplit(".", 1)[-1] if last_part else t)
        if key in frames:
            out.append((t, [frames[key]], "normalised name match" if frames[key] != t else "exact name match"))
        elif key in HAND:
            fs = [f for f in HAND[key][0] if norm(f) in frames]
            if fs:
                out.append((t, [frames[norm(f)] for f in fs], "hand: " + HAND[key][1]))
    return out


def write_tsv(rows: list[tuple[str, list[str], str]], path: Path, header: str) -> None:
    from ..io import atomic_write_text

    lines = [f"# {line}" for line in header.splitlines()] + ["type\tframes\tprovenance"]
    lines += [f"{t}\t{'|'.join(fs)}\t{prov}" for t, fs, prov in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _frame_names(framenet_dir: Path) -> list[str]:
    from ..readers._zip import SafeZip

    with SafeZip(framenet_dir / "frame.zip") as z:  # refuses '..'/absolute members, names a damaged archive
        return sorted(Path(n).stem for n in z.namelist() if n.endswith(".xml") and not n.endswith("frameIndex.xml"))


def main(argv: list[str]) -> None:
    import json

    fn_dir, maven_def, onto_dir, out = (Path(a) for a in argv)
    frames = _frame_names(fn_dir)
    maven = sorted(json.loads(maven_def.read_text()).keys())
    rows = derive(maven, frames)
    write_tsv(rows, out / "maven_framenet.tsv",
              f"MAVEN type -> FrameNet 1.7 frame(s); derived by eventatlas.induction.mappings from\n"
              f"maven_definition.json ({len(maven)} types) and frame.zip ({len(frames)} frames): "
              f"{len(rows)} mapped.")
    rel = json.loads((onto_dir / "event_relation.json").read_text())
    types = sorted({m["event_type"] for pairs in rel.values() for p in pairs for m in p if isinstance(m, dict)})
    rows = derive(types, frames, last_part=True)
    write_tsv(rows, out / "ontoevent_framenet.tsv",
              f"OntoEvent-MAVEN type (Supertype.Type) -> FrameNet 1.7 frame(s), matched on the last part;\n"
              f"derived by eventatlas.induction.mappings: {len(rows)} of {len(types)} mapped.")


if __name__ == "__main__":
    main(sys.argv[1:])
