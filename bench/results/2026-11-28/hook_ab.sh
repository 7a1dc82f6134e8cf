#!/bin/bash
# the cold SessionStart hook (`pyrecall recall --auto --task-text T --hook`, bench index's cold
# runs) with release 12 (this tree) and release 11 (9040267, auto_context v10) in a worktree,
# alternating: 50 generated Claude Code sessions, int8, 9 cold runs each
source /work/main/.venv/bin/activate
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
for run in 1 2; do
  for tree in /work/main /tmp/wt-v11; do
    tag=$([ $tree = /work/main ] && echo v12 || echo v10)
    (cd $tree && PYTHONPATH=$tree python -c "from pyrecall.cli import main; main()" bench index --sessions 50 \
       --model local/all-MiniLM-L6-v2-int8 --sample 64 --runs 9 \
       --json /tmp/diag/hook_${tag}_$run.json > /dev/null 2> /tmp/diag/hook_${tag}_$run.err)
    echo "$tag $run $(uptime)"
  done
done
