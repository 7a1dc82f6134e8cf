#!/bin/bash
# Cold one-shot recalls as `pyrecall bench index` runs them (its QUESTION in the default table
# format; its --auto --task-text T --hook), before (OLD, a commit) and after (this tree), in
# alternating runs against the same running embedded server, PYRECALL_DSN set (issue 18).
#   bench/results/2026-11-27/cold_ab.sh 4094f67 9
# Both trees byte-compiled first; python -P: the tree on PYTHONPATH, not the current folder. Prints every run's wall and CPU seconds and the medians.
set -e
OLD=$1; N=${2:-9}; HERE=$(git rev-parse --show-toplevel); PY=$HERE/.venv/bin/python
WT=$(mktemp -d)/old; git worktree add -q "$WT" "$OLD"; trap 'git worktree remove --force "$WT"' EXIT
$PY -m compileall -q "$WT/pyrecall" "$HERE/pyrecall" > /dev/null
export HF_HUB_OFFLINE=1
# the embedded server's database, unless PYRECALL_DSN names one (and PYRECALL_AGENT, Q another
# agent and question: e.g. a `bench latency --keep` database of 100k chunks)
PYRECALL_DSN=${PYRECALL_DSN:-$(PYRECALL_DATA_DIR=${PYRECALL_DATA_DIR:-$HERE/.pyrecall} $HERE/.venv/bin/pyrecall db url 2>/dev/null)}
export PYRECALL_DSN
Q=${Q:-"why did the billing migration fail with a duplicate key?"}
HOOK='{"cwd": "/home/dev/acme-api", "session_id": "new-session"}'
T=$(mktemp)
one() {  # tree what -> "wall cpu" seconds (cpu: user + system of the process)
  if [ "$2" = recall ]; then
    PYTHONPATH=$1 /usr/bin/time -f "%e %U %S" -o "$T" $PY -P -c 'from pyrecall.cli import run; run()' \
      recall "$Q" | grep -q 'source=hybrid'
  else
    echo "$HOOK" | PYTHONPATH=$1 /usr/bin/time -f "%e %U %S" -o "$T" $PY -P -c \
      'from pyrecall.cli import run; run()' recall --auto \
      --task-text "add idempotency keys to the orders endpoint" --hook --format json > /dev/null
  fi
  awk '{printf "%.2f/%.2f", $1, $2 + $3}' "$T"
}
median() {  # field (1 wall, 2 cpu) values...
  local f=$1; shift
  printf '%s\n' "$@" | cut -d/ -f"$f" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}
for what in recall hook; do
  before=(); after=()
  for i in $(seq "$N"); do
    before+=("$(one "$WT" $what)")
    after+=("$(one "$HERE" $what)")
  done
  echo "$what before (wall/cpu s): ${before[*]}"; echo "$what after  (wall/cpu s): ${after[*]}"
  echo "$what median before: wall $(median 1 "${before[@]}") s, cpu $(median 2 "${before[@]}") s"
  echo "$what median after:  wall $(median 1 "${after[@]}") s, cpu $(median 2 "${after[@]}") s"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
