"""The one cleaner of text and JSON values (pyrecall._text): what PostgreSQL text and jsonb
refuse, taken out the same way by the importers and by the client's metadata."""

import json

import pytest

from pyrecall._ingest import clean_json
from pyrecall._text import clean_text, clean_value
from pyrecall.importers import jsonl

INF, NAN = float("inf"), float("nan")

VALUES = [  # value, cleaned
    (NAN, None),
    (INF, None),
    (-INF, None),
    (1e308, 1e308),
    (-0.0, -0.0),
    ("ta\x00ble", "table"),
    ("\x00\x00", ""),
    ("lone \ud800 high", "lone \ufffd high"),
    ("lone \udfff low", "lone \ufffd low"),
    ("\ud83d\ude00 pair escaped apart", "\ufffd\ufffd pair escaped apart"),
    ("😀 real pair", "😀 real pair"),
    ({"k\x00ey": "v", "\ud800": 1}, {"key": "v", "\ufffd": 1}),
    ({1: "int key", None: "none key"}, {"1": "int key", "None": "none key"}),
    ([NAN, [INF, "a\x00"], (1, "\udc00")], [None, [None, "a"], [1, "\ufffd"]]),
    ({"deep": {"er": [{"x": -INF}]}}, {"deep": {"er": [{"x": None}]}}),
    (True, True),
    (None, None),
    (7, 7),
]


@pytest.mark.parametrize(("value", "cleaned"), VALUES)
def test_clean_value(value, cleaned):
    assert clean_value(value) == cleaned
    # what the client stores: JSON that jsonb accepts (no NaN, no NUL escape, no lone surrogate)
    text = clean_json({"v": value})
    assert json.loads(text) == json.loads(json.dumps({"v": cleaned}, default=str))
    assert "\\u0000" not in text and "NaN" not in text and "Infinity" not in text
    text.encode("utf-8")


def test_clean_text_keeps_what_postgres_takes():
    assert clean_text("tab\tnew\nline é 中文") == "tab\tnew\nline é 中文"


def test_importers_clean_metadata_as_the_client_does(tmp_path):
    """A JSONL line whose metadata holds NaN, Infinity, a NUL and a lone surrogate (all valid
    to Python's json): the importer's metadata is what clean_value makes of it."""
    raw = {"score": NAN, "big": INF, "n\x00ame": "x\x00y", "s": "\ud800", "list": [-INF, 2]}
    line = json.dumps({"session_id": "s", "role": "user", "content": "hi", "metadata": raw})
    assert "NaN" in line and "\\ud800" in line and "\\u0000" in line
    path = tmp_path / "m.jsonl"
    path.write_text(line + "\n")
    [session] = jsonl.parse(path).sessions
    assert session.messages[0].metadata == clean_value(raw) == {
        "score": None, "big": None, "name": "xy", "s": "\ufffd", "list": [None, 2]}
