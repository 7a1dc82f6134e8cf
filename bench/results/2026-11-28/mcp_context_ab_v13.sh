#!/bin/bash
# the MCP context tool at 100k chunks, release 13 (this tree) and release 12 (00159ac: auto_context v12) in a worktree,
# alternating, 2 runs each (`git worktree add /tmp/wt-v12 00159ac` first)
source /work/main/.venv/bin/activate
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
out=/work/main/bench/results/2026-11-28
for run in 1 2; do
  for tree in /work/main /tmp/wt-v12; do
    tag=$([ $tree = /work/main ] && echo v13 || echo v12)
    (cd $tree && PYTHONPATH=$tree python -c "from pyrecall.cli import main; main()" bench mcp --chunks 100000 --calls 100 --tool context --centres model > $out/mcp_context_100k_near_${tag}_${run}_r13.json 2> /tmp/mcp_${tag}_$run.err)
    echo "$tag $run $(uptime)"
  done
done
