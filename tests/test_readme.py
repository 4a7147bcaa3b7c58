"""The README documents what a newcomer needs, and its examples are valid."""
from __future__ import annotations

import json
import re
from pathlib import Path

from eventatlas.methods import SPECS, validate_params
from eventatlas.readers import REGISTRY

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_every_params_example_validates():
    """Every `--params` in the README's bash blocks is valid (console blocks may show refusals)."""
    from eventatlas.methods import get_spec

    bash = "\n".join(re.findall(r"```bash\n(.*?)```", README, re.S)).replace("\\\n", "")
    n = 0
    for line in bash.splitlines():
        for ex in re.findall(r"params[ =]'(\{.*?\})'", line):
            p = json.loads(ex)
            one = re.search(r"eventatlas train (\w+)", line)
            if one:  # `eventatlas train METHOD` takes the method's own config
                get_spec(one.group(1)).validate(p)
            else:
                validate_params(p, list(p))  # raises on an unknown method or key
            n += 1
    assert n >= 3


def test_readers_env_vars_methods_and_metrics_documented():
    for name in REGISTRY:
        assert f"| `{name}` |" in README, name
    code = "\n".join(p.read_text(encoding="utf-8") for d in ("eventatlas", "tasks", "flows", "scripts")
                     for p in (REPO / d).rglob("*") if p.suffix in (".py", ".sh"))
    for var in sorted(set(re.findall(r"EVENTATLAS_[A-Z_]+[A-Z]", code))):
        assert f"`{var}`" in README, var
    for method in SPECS:
        assert f"`{method}`" in README
    assert "eventatlas methods" in README
    for metric in ("ari", "bcubed_f", "purity_f", "naming_mean_rank", "mcnc_acc"):
        assert f"`{metric}`" in README


def test_no_duckdb_shell_assumed_and_licences():
    assert not re.search(r"^`?duckdb warehouse/", README, re.M)  # no duckdb CLI is installed
    assert "eventatlas sql" in README
    lic = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in lic and "Version 2.0" in lic and "END OF TERMS AND CONDITIONS" in lic
    for needle in ("CC BY 3.0", "non-commercial", "CC BY-SA", "CC0", "evaluation only"):
        assert needle in README, needle
