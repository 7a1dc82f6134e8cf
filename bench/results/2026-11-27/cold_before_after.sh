#!/bin/bash
# A one-shot `pyrecall recall` cold, before (OLD, a commit) and after (this tree), in
# alternating runs against the same running embedded server (issue 18, 2026-11-27 third session).
#   bench/results/2026-11-27/cold_before_after.sh 67217e5 9
# Both trees byte-compiled first (PYTHONDONTWRITEBYTECODE would make each run compile pyrecall).
# FLAWED (found in the fifth session): `python -c` puts the current folder first on sys.path, so
# run from the checkout "before" imported this tree's modules too (only main() vs run() differed).
# Kept as the record of the third session's figures; use cold_ab.sh (python -P) instead.
# Two paths: the embedded server found by the data directory (no PYRECALL_DSN: a newcomer's
# path), and PYRECALL_DSN set. Prints every run's wall seconds and the medians.
set -e
OLD=$1; N=${2:-9}; HERE=$(git rev-parse --show-toplevel); PY=$HERE/.venv/bin/python
WT=$(mktemp -d)/old; git worktree add -q "$WT" "$OLD"; trap 'git worktree remove --force "$WT"' EXIT
$PY -m compileall -q "$WT/pyrecall" "$HERE/pyrecall" > /dev/null
DATA=${PYRECALL_DATA_DIR:-$HERE/.pyrecall}
URL=$(PYRECALL_DATA_DIR=$DATA $HERE/.venv/bin/pyrecall db url)
Q="how did we handle authentication tokens?"
export HF_HUB_OFFLINE=1
one() {  # tree entry
  local s e; s=$(date +%s.%N)
  PYTHONPATH=$1 $PY -c "$2" recall "$Q" --format json | grep -q '"source": "hybrid"'
  e=$(date +%s.%N); echo "$e - $s" | bc
}
for path in data-dir dsn; do
  if [ $path = dsn ]; then export PYRECALL_DSN=$URL; else unset PYRECALL_DSN; export PYRECALL_DATA_DIR=$DATA; fi
  before=(); after=()
  for i in $(seq "$N"); do
    before+=("$(one "$WT" 'from pyrecall.cli import main; main()')")
    after+=("$(one "$HERE" 'from pyrecall.cli import run; run()')")
  done
  echo "$path before: ${before[*]}"; echo "$path after:  ${after[*]}"
  printf '%s\n' "${before[@]}" | sort -n | awk -v p="$path" '{a[NR]=$1} END {printf "%s median before %.3f s\n", p, a[int((NR+1)/2)]}'
  printf '%s\n' "${after[@]}" | sort -n | awk -v p="$path" '{a[NR]=$1} END {printf "%s median after  %.3f s\n", p, a[int((NR+1)/2)]}'
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
