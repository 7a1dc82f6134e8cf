#!/bin/bash
# the context tool at 100k chunks, release 12 (this tree) and release 11 (9040267: auto_context v10), alternating
source /work/main/.venv/bin/activate
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
for run in 1 2; do
  for tree in /work/main /tmp/wt-v11; do
    tag=$([ $tree = /work/main ] && echo v12 || echo v10)
    (cd $tree && PYTHONPATH=$tree python -c "from pyrecall.cli import main; main()" bench mcp --chunks 100000 --calls 100 --tool context --centres model > /tmp/diag/mcp_${tag}_$run.json 2> /tmp/diag/mcp_${tag}_$run.err)
    echo "$tag $run $(uptime)"
  done
done
