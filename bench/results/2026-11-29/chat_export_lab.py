"""How `pyrecall import` copes with a large ChatGPT data export (conversations.json).

    python chat_export_lab.py make OUT.json CONVERSATIONS MESSAGES   # a synthetic export
    /usr/bin/time -v pyrecall import OUT_DIR --agent-id chat-lab --dsn ...

The generator writes ChatGPT's format (a mapping tree per conversation, current_node, a
regenerated answer as a second branch every tenth conversation), with English-like text of
varied length (40-400 words a message), so that parse, chunking and ingest see realistic sizes.
"""

from __future__ import annotations

import json
import random
import sys

WORDS = ("the pool connection replica postgres timeout deploy build cache index query plan vacuum "
         "table row lock transaction retry backoff worker queue message token budget chunk vector "
         "embedding recall session agent memory import export schema migration branch release "
         "error fix test flaky fast slow large small because when then after before with without").split()


def text(rng: random.Random) -> str:
    n = rng.randint(40, 400)
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def conversation(i: int, n: int, rng: random.Random) -> dict:
    t = 1735689600.0 + i * 3600
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for j in range(n):
        nid = f"c{i}-m{j}"
        role = "user" if j % 2 == 0 else "assistant"
        mapping[nid] = {"id": nid, "parent": parent, "children": [], "message": {
            "id": nid, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t + j * 30,
            "update_time": None, "content": {"content_type": "text", "parts": [text(rng)]},
            "status": "finished_successfully", "end_turn": role == "assistant", "weight": 1.0,
            "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {}, "recipient": "all"}}
        mapping[parent]["children"].append(nid)
        if role == "assistant" and i % 10 == 0 and j == 1:       # a regenerated answer, not shown
            alt = f"{nid}-alt"
            mapping[alt] = {**mapping[nid], "id": alt, "children": [],
                            "message": {**mapping[nid]["message"], "id": alt}}
            mapping[parent]["children"].insert(0, alt)
        parent = nid
    return {"title": f"Conversation {i}", "create_time": t, "update_time": t + n * 30, "mapping": mapping,
            "moderation_results": [], "current_node": parent, "conversation_id": f"conv-{i:06d}",
            "id": f"conv-{i:06d}", "default_model_slug": "gpt-4o"}


if __name__ == "__main__":
    cmd, out, convs, msgs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    assert cmd == "make"
    rng = random.Random(7)
    with open(out, "w") as f:
        json.dump([conversation(i, msgs, rng) for i in range(convs)], f)
