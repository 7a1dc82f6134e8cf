#!/bin/bash
# The one-shot SessionStart hook (`pyrecall recall --auto --task-text T --hook`, a repository
# with no history yet) on a large agent, with recall._vector_arm_scoped as of OLD (a commit) and
# as in this tree, applied in turn to the database before each run (bench/LOG.md 2026-11-28).
#   PYRECALL_DSN=... PYRECALL_AGENT=agent-00000 bench/results/2026-11-28/hook_sql_ab.sh 52c023b 9
set -e
OLD=$1; N=${2:-9}; HERE=$(git rev-parse --show-toplevel); PY=$HERE/.venv/bin/python
export HF_HUB_OFFLINE=1 PYRECALL_DSN PYRECALL_AGENT
git -C "$HERE" show "$OLD:sql/idempotent/015-vector-arm.sql" > /tmp/vector_arm_old.sql
HOOK='{"cwd": "/home/dev/acme-api", "session_id": "new-session"}'
T=$(mktemp)
one() {  # sql-file -> "wall/cpu" seconds of one hook run
  PGOPTIONS="-c client_min_messages=warning" psql -X -q "$PYRECALL_DSN" -f "$1" > /dev/null
  echo "$HOOK" | /usr/bin/time -f "%e %U %S" -o "$T" $PY -P -c 'from pyrecall.cli import run; run()' \
    recall --auto --task-text "add idempotency keys to the orders endpoint" --hook --format json > /dev/null
  awk '{printf "%.2f/%.2f", $1, $2 + $3}' "$T"
}
median() { local f=$1; shift; printf '%s\n' "$@" | cut -d/ -f"$f" | sort -n | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'; }
before=(); after=()
for i in $(seq "$N"); do
  before+=("$(one /tmp/vector_arm_old.sql)")
  after+=("$(one "$HERE/sql/idempotent/015-vector-arm.sql")")
done
echo "hook before (wall/cpu s): ${before[*]}"; echo "hook after  (wall/cpu s): ${after[*]}"
echo "hook median before: wall $(median 1 "${before[@]}") s, cpu $(median 2 "${before[@]}") s"
echo "hook median after:  wall $(median 1 "${after[@]}") s, cpu $(median 2 "${after[@]}") s"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
