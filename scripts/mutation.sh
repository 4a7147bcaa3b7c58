#!/bin/bash
# Mutation testing of the hardened modules (README "Mutation testing"; not part of CI).
# Needs `pip install -e '.[mutation]'`. Scope and tests: [tool.mutmut] in pyproject.toml; of
# eventatlas/warehouse.py only the publish path is run (connect/transaction/publish and the row
# checks it calls). Usage: scripts/mutation.sh [--summary] [http|io|publish]...   (default: all three;
# --summary: only print the counts of the last run)
# Prints killed/survived per module; `mutmut results` / `mutmut show NAME` list the survivors.
set -euo pipefail
cd "$(dirname "$0")/.."
MUTMUT=${MUTMUT:-$(dirname "$(command -v python)")/mutmut}
[ -x "$MUTMUT" ] || MUTMUT=.venv/bin/mutmut
declare -A PATTERNS=(
  [http]='eventatlas.wiki.http.*'
  [io]='eventatlas.io.*'
  [publish]='eventatlas.publishing.* eventatlas.warehouse.xǁWarehouseǁconnect__* eventatlas.warehouse.xǁWarehouseǁtransaction__* eventatlas.warehouse.xǁWarehouseǁpublish__* eventatlas.warehouse.x_metrics_table__* eventatlas.warehouse.x_train_log_table__* eventatlas.warehouse.x__insert_arrow__* eventatlas.warehouse.x__lock_holder__* eventatlas.warehouse.x__json__*'
)
summary_only=0; [ "${1:-}" = "--summary" ] && { summary_only=1; shift; }
groups=("$@"); [ ${#groups[@]} -gt 0 ] || groups=(http io publish)
mkdir -p mutants
for g in "${groups[@]}"; do
  [ $summary_only = 1 ] && break
  # shellcheck disable=SC2086
  "$MUTMUT" run --max-children "${MUTATION_CHILDREN:-1}" ${PATTERNS[$g]} > "mutants/run-$g.log" 2>&1 || true
done
python - "${groups[@]}" <<'PY'
import fnmatch, json, pathlib, sys
pats = {"http": ["eventatlas.wiki.http.*"], "io": ["eventatlas.io.*"],
        "publish": ["eventatlas.publishing.*", "eventatlas.warehouse.xǁWarehouseǁconnect__*",
                    "eventatlas.warehouse.xǁWarehouseǁtransaction__*", "eventatlas.warehouse.xǁWarehouseǁpublish__*",
                    "eventatlas.warehouse.x_metrics_table__*", "eventatlas.warehouse.x_train_log_table__*",
                    "eventatlas.warehouse.x__insert_arrow__*", "eventatlas.warehouse.x__lock_holder__*",
                    "eventatlas.warehouse.x__json__*"]}
from collections import Counter
from mutmut.stats import status_by_exit_code
codes = {}
for meta in pathlib.Path("mutants").rglob("*.py.meta"):
    codes.update(json.loads(meta.read_text())["exit_code_by_key"])
# kill rate = (killed + timeout) / every mutant run; "no tests" (no selected test covers it) counts as surviving
for g in sys.argv[1:]:
    st = Counter(status_by_exit_code[v] for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in pats[g]))
    run = sum(st.values()) - st["not checked"]
    dead = st["killed"] + st["timeout"]
    print(f"{g}: {run} mutants run, {st['killed']} killed, {st['timeout']} timeout, {st['survived']} survived, "
          f"{st['no tests']} no tests, {st['suspicious'] + st['segfault']} other; kill rate {100 * dead / max(run, 1):.1f}%"
          + (f" ({st['not checked']} not checked)" if st["not checked"] else ""))
PY
