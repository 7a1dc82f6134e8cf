"""The benchmarks, small: the code paths of `pyrecall bench locomo` (one conversation) and
`pyrecall bench latency` (20k chunks) run end to end, and their reports have the documented
shape with values in range. No figure is asserted: CI measures nothing."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pyrecall import ConfigError
from pyrecall.bench import latency, locomo
from pyrecall.bench.locomo import _connect
from pyrecall.cli import main

LOCOMO = Path(os.environ.get("PYRECALL_LOCOMO_DATA") or
              Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json")
SAMPLE = Path(__file__).resolve().parent / "fixtures" / "locomo_format_sample.json"


@pytest.mark.parametrize("raw, ids, bad", [
    (["D1:3"], ["D1:3"], 0),
    (["D8:6; D9:17"], ["D8:6", "D9:17"], 0),
    (["D30:05"], ["D30:5"], 0),
    (["D:11:26"], [], 1),
    (["D"], [], 1),
    (["D1:3", "D1:3"], ["D1:3"], 0),
])
def test_parse_evidence(raw, ids, bad):
    assert locomo.parse_evidence(raw) == (ids, bad)


@pytest.mark.parametrize("text, iso", [
    ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00+00:00"),
    ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00+00:00"),
    ("12:09 am on 13 September,  2023", "2023-09-13T00:09:00+00:00"),
])
def test_parse_date(text, iso):
    assert locomo.parse_date(text).isoformat() == iso


def _q(evidence, sessions):
    return locomo.Question("a", "q", 1, evidence, set(sessions), datetime(2024, 1, 1, tzinfo=UTC))


DIA = {1: "D1:1", 2: "D1:2", 3: "D2:1", 4: "D2:2", 5: "D3:1"}


@pytest.mark.parametrize("ranking, evidence, sessions, expect", [
    # a turn pair covers both of its turns
    ([("s1", [1, 2])], ["D1:2"], ["s1"], {"recall@1": 1.0, "all@10": 1.0, "mrr": 1.0}),
    # half the evidence found, at rank 2
    ([("s3", [5]), ("s1", [1, 2])], ["D1:1", "D2:1"], ["s1", "s2"],
     {"recall@1": 0.0, "recall@2": 0.5, "all@10": 0.0, "session_recall@5": 0.0, "mrr": 0.5}),
    # nothing returned
    ([], ["D1:1"], ["s1"], {"recall@1": 0.0, "all@10": 0.0, "session_recall@5": 0.0, "mrr": 0.0}),
    # both sessions among the first five distinct ones, though the turns are not all there
    ([("s2", [3]), ("s2", [4]), ("s1", [2])], ["D1:1", "D2:1"], ["s1", "s2"],
     {"recall@2": 0.5, "recall@3": 0.5, "session_recall@5": 1.0, "mrr": 1.0}),
])
def test_score_ranking(ranking, evidence, sessions, expect):
    got = locomo.score_ranking(ranking, _q(evidence, sessions), DIA, [1, 2, 3])
    assert {k: got[k] for k in expect} == expect


def test_conversation_sessions_map_turns_to_messages():
    sample = {"sample_id": "c", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "Look", "blip_caption": "a cat"}]}}
    (s,) = locomo.conversation_sessions(sample, "c")
    assert [(m.role, m.external_id, m.content, m.metadata["speaker"]) for m in s.messages] == [
        ("user", "D1:1", "Hi", "Ann"), ("assistant", "D1:2", "Look [shares a photo: a cat]", "Bob")]
    assert s.messages[1].metadata["blip_caption"] == "a cat"
    assert (s.messages[1].created_at - s.messages[0].created_at).total_seconds() == 60


def test_agent_sizes_are_zipf_and_sum():
    sizes = latency.agent_sizes(20_000, 50)
    assert sum(sizes) == 20_000 and sizes == sorted(sizes, reverse=True) and min(sizes) >= 10


def test_parse_sizes():
    assert latency.parse_sizes("100x2, 20,5x1") == [100, 100, 20, 5]
    for bad in ("", "x3", "10x0", "ten"):
        with pytest.raises(ConfigError):
            latency.parse_sizes(bad)


def test_topic_vectors_are_mixtures_and_queries_sit_away():
    """Topic mixtures: unit vectors; a query's nearest stored vector is farther than a stored
    vector's nearest neighbour (a question sits away from the statement that answers it),
    and the 10th and 11th neighbours are close (what makes the search hard); clusters are
    tighter."""
    def shape(kind):
        synth = latency.Synth(11, kind)
        topics = synth.rng.integers(0, latency.N_TOPICS, 3000)
        v = synth.chunk_vectors(topics, topics % latency.SUBTOPICS)
        q = np.stack([synth.query_vector(int(t)) for t in topics[:50]])
        assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5) and v.dtype == np.float32
        stored = np.sort(v[:50] @ v[50:].T, axis=1)[:, ::-1]
        asked = np.sort(q @ v.T, axis=1)[:, ::-1]
        return stored[:, 0].mean(), asked[:, 0].mean(), (asked[:, 9] - asked[:, 10]).mean()

    stored, asked, gap = shape("topic")
    assert asked < stored and gap < 0.01
    c_stored, c_asked, _ = shape("cluster")
    assert c_stored > stored + 0.2 and c_asked > asked + 0.2
    with pytest.raises(ConfigError, match="vectors must be one of"):
        latency.Synth(1, "clusters")


def test_bench_latency_topic_vectors_after_embed(server_url):
    result = CliRunner().invoke(main, [
        "bench", "latency", "--sizes", "2500x1,20x3", "--vectors", "topic", "--after-embed",
        "--queries", "4", "--clients", "", "--json", "--quiet", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["vectors"] == "topic" and report["agents"] == 4
    assert report["agent_sizes"] == {"largest": 2500, "smallest": 20,
                                     "by_class": {"small": 3, "medium": 1, "large": 0}}
    stages = report["after_embed"]
    assert list(stages) == ["right_after", "again", "after_reading_every_row",
                            "after_gin_clean_pending_list", "after_vacuum"]
    assert stages["right_after"]["table"]["dead"] >= report["chunks"]      # one dead version each
    assert not stages["right_after"]["table"]["autovacuumed"]          # kept off meanwhile
    assert stages["after_vacuum"]["table"] | {"live": 0} == {
        "live": 0, "dead": 0, "pages": stages["after_vacuum"]["table"]["pages"], "all_visible": 1.0,
        "autovacuumed": False, "autoanalyzed": False}
    for r in stages.values():
        assert 0 < r["hybrid"]["p50"] <= r["hybrid"]["p95"]
        assert r["hybrid"]["cpu_ms_per_call"] is None or r["hybrid"]["cpu_ms_per_call"] >= 0
    assert _in_unit(report["latency_ms"]["medium"]["hybrid"]["vector_arm_recall@10"])


def test_bench_latency_keep_leaves_the_database(server_url):
    result = CliRunner().invoke(main, [
        "bench", "latency", "--sizes", "20x3", "--vectors", "topic", "--queries", "2", "--clients", "",
        "--json", "--quiet", "--dsn", server_url, "--keep"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    try:
        with _connect(report["url"]) as conn:
            assert conn.execute("select count(*) from recall.chunks").fetchone()[0] == report["chunks"] == 60
    finally:
        from conftest import drop_database
        drop_database(server_url, report["url"])
    without = CliRunner().invoke(main, ["bench", "latency", "--sizes", "20x3", "--keep", "--quiet"])
    assert without.exit_code == 1 and without.output.strip().count("\n") == 0
    assert "needs a DSN" in without.output and "Traceback" not in without.output


def test_bench_latency_bad_sizes_is_one_line():
    result = CliRunner().invoke(main, ["bench", "latency", "--sizes", "100x", "--quiet"])
    assert result.exit_code == 1 and result.output.strip().count("\n") == 0
    assert "expected sizes like 100000x1,5000x10" in result.output and "Traceback" not in result.output


def _in_unit(x):
    return isinstance(x, float | int) and 0.0 <= x <= 1.0


PRODUCT = {"dense", "text", "hybrid_recall", "session_recall"}
BASELINES = {"baseline_dense", "baseline_bm25", "baseline_rrf"}


def _check_budgets(report: dict, n_questions: int) -> None:
    """Every method judged at every budget: scores in 0..1, the context within the budget on
    average, and a larger budget never holding less evidence (each context extends the last)."""
    budgets = [str(b) for b in report["budgets"]]
    assert budgets and report["chunking"] in ("window", "turn_pair")
    for name, r in report["methods"].items():
        figures = [r["budget"][b] for b in budgets]
        for b, f in zip(budgets, figures, strict=True):
            assert _in_unit(f["recall"]) and _in_unit(f["all"]) and 0 < f["tokens"] <= int(b), (name, b, f)
            assert sum(c["n"] for c in f["by_category"].values()) == n_questions
            if "over" in f:     # the product's contexts, as the model counts their text
                assert _in_unit(f["over"]) and f["over_max"] >= 0, (name, b, f)
        if name in ("hybrid_recall", "session_recall"):   # v7 and v8 pay the model's counts: never over
            assert all(f["over"] == 0 == f["over_max"] for f in figures), figures
        assert [f["recall"] for f in figures] == sorted(f["recall"] for f in figures), name
        assert [f["tokens"] for f in figures] == sorted(f["tokens"] for f in figures), name


def _check_locomo_report(report: dict, n_questions: int) -> None:
    assert report["n_questions"] == n_questions and report["n_unparseable_evidence"] >= 0
    assert set(report["methods"]) == PRODUCT | BASELINES
    _check_budgets(report, n_questions)
    keys = {"recall@5", "recall@10", "recall@20", "all@10", "session_recall@5", "mrr"}
    for r in (report["methods"][m] for m in PRODUCT):
        assert keys <= set(r) and all(_in_unit(r[k]) for k in keys)
        assert r["recall@5"] <= r["recall@10"] <= r["recall@20"]
        assert set(r["by_category"]) <= {"1", "2", "3", "4"}
        for c in r["by_category"].values():
            assert all(_in_unit(c[k]) for k in keys) and c["n"] > 0
    assert sum(c["n"] for c in report["methods"]["dense"]["by_category"].values()) == n_questions


@pytest.mark.parametrize("ranked, budget, expect", [
    ([(["a"], 100), (["b"], 200), (["c"], 10)], 250, [(["a"], 100)]),   # stops at the first misfit
    ([(["a"], 100), (["b"], 150)], 250, [(["a"], 100), (["b"], 150)]),  # exactly the budget
    ([(["a"], 300)], 250, []),                                          # the best does not fit
    ([], 250, []),
])
def test_fill_stops_at_the_first_piece_that_does_not_fit(ranked, budget, expect):
    assert locomo.fill(ranked, budget) == expect


@pytest.mark.parametrize("context, evidence, expect", [
    ([(["D1:1", "D1:3"], 40), (["D1:3"], 10)], ["D1:1", "D1:2"], {"recall": 0.5, "all": 0.0, "tokens": 50.0}),
    ([(["D1:2"], 5), (["D1:1"], 5)], ["D1:1", "D1:2"], {"recall": 1.0, "all": 1.0, "tokens": 10.0}),
    ([], ["D1:1"], {"recall": 0.0, "all": 0.0, "tokens": 0.0}),
])
def test_score_context(context, evidence, expect):
    assert locomo.score_context(context, _q(evidence, ["s1"])) == expect


def test_baseline_rankings_dense_bm25_and_their_fusion():
    """Vectors chosen by hand: turn 0 is nearest the query; only turn 2 holds the query's
    (stemmed) word; RRF puts turn 2 (first by BM25, second by dense) ahead of turn 1."""
    import bm25s
    import numpy as np

    texts = ["Ann: hello there", "Bob: nothing here", "Ann: I went hiking in Oregon"]
    turns = locomo.Turns(["D1:1", "D1:2", "D1:3"], texts, [4, 4, 8],
                         vectors=np.asarray([[1, 0], [0, 1], [0.8, 0.6]], dtype=np.float32))
    turns.bm25 = bm25s.BM25()
    turns.bm25.index(bm25s.tokenize(texts, stopwords="en", stemmer=locomo._stemmer(),
                                    show_progress=False), show_progress=False)
    q = locomo.Question("a", "Where did she hike?", 1, ["D1:3"], {"s1"}, None)
    got = locomo.baseline_rankings(turns, q, [1.0, 0.0])
    assert got["baseline_dense"] == [0, 2, 1]
    assert got["baseline_bm25"] == [2]
    assert got["baseline_rrf"][:2] == [2, 0]


def test_turn_pair_chunking_and_a_bad_chunking():
    sample = {"sample_id": "c", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"}]}}
    assert locomo.conversation_sessions(sample, "c")[0].metadata["chunking"] == "window"
    assert "chunking" not in locomo.conversation_sessions(sample, "c", chunking="turn_pair")[0].metadata
    with pytest.raises(ConfigError, match="chunking must be one of window, turn_pair, got 'x'"):
        locomo.conversation_sessions(sample, "c", chunking="x")


def test_bench_ingest_small(server_url):
    """`bench ingest`, small: 200 alternating messages in 4 sessions make 100 turn pairs; the
    report says so (the rate is a figure for docs, never asserted)."""
    result = CliRunner().invoke(main, ["bench", "ingest", "--messages", "200", "--sessions", "4",
                                       "--words", "5", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["messages"], report["sessions"], report["chunks"]) == (200, 4, 100)
    assert report["messages_per_s"] > 0 and report["client_cpu_us_per_message"] > 0


def test_bench_append_small(server_url):
    """`bench append`, small: 3 messages appended one by one to a chat session and to a
    turn-pair session of 20; the chunks are those of the 23 messages (the times are figures)."""
    result = CliRunner().invoke(main, ["bench", "append", "--lengths", "20", "--appends", "3",
                                       "--words", "5", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["sessions"]
    # 23 text messages: windows of 4 every 2 start at 1, 3, ..., 21; 11 user/assistant pairs + 1
    assert (row["messages"], row["window"]["chunks"], row["turn_pair"]["chunks"]) == (20, 11, 12)
    assert row["window"]["append_ms_p50"] > 0 and row["turn_pair"]["whole_ms_p50"] > 0


@pytest.mark.parametrize("lengths", ["10,x", "0", ""])
def test_bench_append_bad_lengths_is_one_line(lengths):
    result = CliRunner().invoke(main, ["bench", "append", "--lengths", lengths])
    assert result.exit_code == 2 and "--lengths" in result.output and "Traceback" not in result.output


def test_bench_ingest_sessions_per_transaction(server_url):
    """`bench ingest --per-transaction`: sessions of 250 messages (staged by COPY), three calls in
    one transaction then one: every message stored once, chunked once."""
    result = CliRunner().invoke(main, ["bench", "ingest", "--messages", "1000", "--sessions", "4",
                                       "--words", "3", "--per-transaction", "3", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["messages"], report["sessions_per_transaction"], report["chunks"]) == (1000, 3, 500)


@pytest.mark.parametrize("value, message", [
    ("250,x", "expected numbers separated by commas"),
    ("0,250", "each budget must be between 1 and 1000000"),
])
def test_bench_locomo_bad_budgets_are_usage_errors(value, message):
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(SAMPLE), "--budgets", value])
    assert result.exit_code == 2 and message in result.output


def test_bench_locomo_unknown_method_is_a_usage_error():
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(SAMPLE),
                                       "--methods", "hybrid_recall,hybrid_recall_v99"])
    assert result.exit_code == 2 and "unknown method hybrid_recall_v99; choose from" in result.output


def _bench_locomo(server_url: str, data: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, [
        "bench", "locomo", "--data", str(data), *extra, "--json", "--quiet", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.slow
def test_bench_locomo_on_a_file_of_the_same_format(server_url):
    """Always runs: a small conversation of our own in LoCoMo's format (4 dated sessions, a
    shared photo, 11 askable questions of categories 1-4, one unparseable evidence id, a
    category-5 question and one without evidence, which are not asked)."""
    report = _bench_locomo(server_url, SAMPLE)
    _check_locomo_report(report, 11)
    assert report["n_unparseable_evidence"] == 1


@pytest.mark.slow
def test_bench_locomo_with_another_model(server_url):
    report = _bench_locomo(server_url, SAMPLE, "--model", "local/all-MiniLM-L6-v2-int8",
                           "--no-baselines", "--methods", "hybrid_recall", "--budgets", "250")
    assert report["model"] == "local/all-MiniLM-L6-v2-int8" and report["n_questions"] == 11
    assert list(report["methods"]) == ["hybrid_recall"] and report["load"]["embedded"] > 0
    assert 0 < report["methods"]["hybrid_recall"]["recall@10"] <= 1


def test_one_agent_holds_every_conversation(tmp_path):
    """--one-agent: two conversations (the sample and a copy of it named otherwise) become one
    agent's sessions, kept apart by their names; every question is asked at the file's end."""
    (sample,) = json.loads(SAMPLE.read_text())
    other = {**json.loads(json.dumps(sample)), "sample_id": "copy"}
    conv = other["conversation"]
    for key in [k for k in conv if k.endswith("_date_time")]:
        conv[key] = conv[key].replace("2023", "2024")
    path = tmp_path / "two.json"
    path.write_text(json.dumps([sample, other]))
    apart = locomo.load_file(path)
    one = locomo.load_file(path, one_agent="all")
    assert len(apart.sessions) == 2 and list(one.sessions) == ["all"]
    ids = [s.session_id for s in one.sessions["all"]]
    assert len(ids) == len(set(ids)) == sum(len(v) for v in apart.sessions.values())
    assert sorted(ids) == sorted(s.session_id for v in apart.sessions.values() for s in v)
    assert {s.agent_id for s in one.sessions["all"]} == {"all"}
    assert len(one.questions) == len(apart.questions) == 22
    last = max(m.created_at for s in one.sessions["all"] for m in s.messages)
    assert {q.agent_id for q in one.questions} == {"all"} and {q.as_of for q in one.questions} == {
        last + locomo.TURN_SPACING}
    assert [q.evidence_sessions for q in one.questions] == [q.evidence_sessions for q in apart.questions]
    assert all(q.evidence_sessions <= set(ids) for q in one.questions)


@pytest.mark.slow
def test_bench_locomo_versions(server_url):
    """--methods: the versions side by side, by the names they are called."""
    report = _bench_locomo(server_url, SAMPLE, "--no-baselines", "--budgets", "100,400",
                           "--methods", "hybrid_recall_v4,hybrid_recall_v5,session_recall_v5")
    assert list(report["methods"]) == ["hybrid_recall_v4", "hybrid_recall_v5", "session_recall_v5"]
    for r in report["methods"].values():
        for b in ("100", "400"):
            assert _in_unit(r["budget"][b]["recall"]) and 0 < r["budget"][b]["tokens"] <= int(b)


@pytest.mark.slow
def test_bench_locomo_auto_context_at_budgets(server_url):
    """auto_context (the question as its task) is judged at the budgets only: no recall@k, no
    latency row; its contexts within each budget, v13 (v12's fill) holding at least v10's evidence on the
    sample, v14 (v13's rows in another order) and v15 (Recent turn by turn: a chat's windows were
    already) v13's figures, and the table printed without a ranking."""
    report = _bench_locomo(server_url, SAMPLE, "--no-baselines", "--budgets", "60,250", "--methods",
                           "auto_context_v10,auto_context_v13,auto_context_v14,auto_context_v15,auto_context")
    methods = report["methods"]
    assert list(methods) == ["auto_context_v10", "auto_context_v13", "auto_context_v14", "auto_context_v15",
                             "auto_context"]
    for name, r in methods.items():
        assert set(r) == {"budget"}
        for b in ("60", "250"):
            assert _in_unit(r["budget"][b]["recall"]) and 0 <= r["budget"][b]["tokens"] <= int(b)
            assert r["budget"][b]["over"] == 0
            # (v10 shows nothing at 60 tokens: no whole chunk fits; v13 fills it)
            assert name == "auto_context_v10" or r["budget"][b]["tokens"] > 0.9 * int(b)
    assert methods["auto_context"] == methods["auto_context_v15"] == methods["auto_context_v14"] == \
        methods["auto_context_v13"]
    assert sum(methods["auto_context_v13"]["budget"][b]["recall"] for b in ("60", "250")) > \
        sum(methods["auto_context_v10"]["budget"][b]["recall"] for b in ("60", "250"))
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(SAMPLE), "--no-baselines", "--budgets",
                                       "250", "--methods", "auto_context", "--quiet", "--dsn", server_url])
    assert result.exit_code == 0 and "auto_context" in result.output and "recall@10" not in result.output


def test_bench_locomo_auto_context_needs_budgets():
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(SAMPLE), "--budgets", "",
                                       "--methods", "hybrid_recall,auto_context_v13"])
    assert result.exit_code == 2 and "auto_context_v13 is judged at token budgets only" in result.output


@pytest.mark.slow
def test_bench_locomo_over_budget_is_seen(server_url):
    """The "over" measure (each context's text counted by the model against its budget) sees
    the contexts of the releases that paid estimated counts go over at a small budget (v6: a
    quarter or more of the sample's contexts at 50 tokens), and none of the stable functions'
    (v7 on: the model's counts) at any budget: the guard of _check_budgets can fail."""
    report = _bench_locomo(server_url, SAMPLE, "--no-baselines", "--budgets", "50,100,250",
                           "--methods", "hybrid_recall_v6,session_recall_v6,hybrid_recall,session_recall")
    methods = report["methods"]
    for name in ("hybrid_recall_v6", "session_recall_v6"):
        assert methods[name]["budget"]["50"]["over"] > 0 and methods[name]["budget"]["50"]["over_max"] > 0
    for name in ("hybrid_recall", "session_recall"):
        assert all(f["over"] == 0 == f["over_max"] for f in methods[name]["budget"].values())


@pytest.mark.slow
def test_bench_locomo_one_agent(server_url):
    report = _bench_locomo(server_url, SAMPLE, "--one-agent")
    _check_locomo_report(report, 11)
    assert report["one_agent"] == "locomo" and report["n_agents"] == 1 and report["n_conversations"] == 1


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO.exists(), reason=f"the LoCoMo data is not at {LOCOMO} "
                    "(set PYRECALL_LOCOMO_DATA); the same code runs on tests/fixtures above")
def test_bench_locomo_one_conversation(server_url):
    report = _bench_locomo(server_url, LOCOMO, "--limit-conversations", "1",
                           "--limit-questions", "25")
    _check_locomo_report(report, 25)


@pytest.mark.slow
def test_bench_latency_20k(server_url):
    result = CliRunner().invoke(main, [
        "bench", "latency", "--chunks", "20000", "--agents", "50", "--queries", "10",
        "--load-jobs", "2", "--clients", "1,3", "--clients-seconds", "0.5",
        "--json", "--quiet", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    load = report["under_load"]
    assert load["seconds"] == 0.5 and load["queries"] >= 10
    assert list(load["by_clients"]) == ["1", "3"]
    for r in load["by_clients"].values():
        assert r["n_queries"] >= 1 and r["qps"] > 0 and 0 < r["p50"] <= r["p95"] <= r["p99"]
    assert load["by_clients"]["1"]["qps_over_first"] == 1.0
    assert load["by_clients"]["3"]["n_queries"] >= 3       # every client asked at least once
    assert report["chunks"] >= 20_000 and report["messages"] >= 2 * 20_000
    assert report["ingest"]["jobs"] == 2
    assert report["ingest"]["messages_per_s"] > 0 and report["index"]["build_s"] >= 0
    assert set(report["latency_ms"]) >= {"small", "overall"}
    for r in report["latency_ms"].values():
        for method in ("exact", "ann", "hybrid", "session"):
            s = r[method]
            assert 0 < s["p50"] <= s["p95"] <= s["p99"] and not math.isnan(s["p99"])
        assert _in_unit(r["ann"]["recall@10"]) and _in_unit(r["hybrid"]["vector_arm_recall@10"])


@pytest.mark.parametrize("value, message", [
    ("1,x", "expected counts like 1,2,4"),
    ("0", "between 1 and 64"),
    ("1,65", "between 1 and 64"),
])
def test_bench_latency_clients_checked(value, message):
    result = CliRunner().invoke(main, ["bench", "latency", "--clients", value])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_bench_latency_clients_parsed():
    from pyrecall.bench.cli import _client_counts
    assert _client_counts(None, None, " 1, 2,2,4 ") == [1, 2, 4]
    assert _client_counts(None, None, "") == []


def _loaded(url: str, jobs: int) -> tuple[dict, list[tuple]]:
    synth = latency.Synth(3)
    agents = latency.plan_agents(synth, latency.agent_sizes(600, 5))
    with _connect(url) as conn:
        report = latency.load(conn, synth, agents, batch_messages=100, jobs=jobs,
                              connect=lambda: _connect(url))
        rows = conn.execute("""select agent_id, session_id, kind, first_seq, part, content
                               from recall.chunks order by 1, 2, 3, 4, 5""").fetchall()
    return report, rows


def test_parallel_load_stores_what_one_connection_stores(server_url):
    """Batches spread over two connections (and so committed in any order) give the same
    messages and chunks as one connection."""
    from pyrecall.bench._scratch import scratch_database

    with scratch_database(server_url) as one:
        serial, serial_rows = _loaded(one, jobs=1)
    with scratch_database(server_url) as two:
        parallel, parallel_rows = _loaded(two, jobs=2)
    assert serial["messages"] == parallel["messages"] == 1200
    assert (serial["jobs"], parallel["jobs"]) == (1, 2)
    assert len(serial_rows) >= 600 and parallel_rows == serial_rows   # (long pairs: 2+ windows)


def test_parallel_load_fails_with_the_jobs_error(server_url):
    """A job that cannot connect stops the load with its error instead of hanging it."""
    from pyrecall.bench._scratch import scratch_database

    def refuse():
        raise OSError("no connection for this job")

    synth = latency.Synth(3)
    agents = latency.plan_agents(synth, latency.agent_sizes(600, 5))
    with scratch_database(server_url) as url, _connect(url) as conn:
        with pytest.raises(OSError, match="no connection for this job"):
            latency.load(conn, synth, agents, batch_messages=100, jobs=2, connect=refuse)


def test_raw_ann_query_goes_through_the_agents_own_index(server_url):
    """(b) asks an agent that has a partial index of its own with that index's predicate, so
    the raw ANN figure is an ANN scan and not the exact plan; other agents get no predicate."""
    from pyrecall.bench._scratch import scratch_database

    synth = latency.Synth(5)
    agents = latency.plan_agents(synth, latency.agent_sizes(1500, 3))
    big, small = agents[0], agents[-1]
    with scratch_database(server_url) as url, _connect(url) as conn:
        latency.load(conn, synth, agents)
        latency.set_embeddings(conn, synth, agents)
        conn.execute("update recall.config set value = %s where key = 'agent_index_min_rows'",
                     [str(small.size + 1)])
        latency.build_index(conn)
        index = conn.execute("select v.index_oid::regclass::text "
                             "from recall._agent_vector_index(%s) v", [big.agent_id]).fetchone()[0]
        assert index is not None
        assert conn.execute("select index_oid from recall._agent_vector_index(%s)",
                            [small.agent_id]).fetchone()[0] is None
        q = synth.vectors(big.topics[:1], np.array([0]))[0]
        with conn.transaction():
            conn.execute("set local enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "explain " + latency._ann_query(conn, big.agent_id),
                {"q": q, "agent": big.agent_id}).fetchall())
        assert f"Index Scan using {index.split('.')[-1]}" in plan, plan
        assert "hashtextextended" not in latency._ann_query(conn, small.agent_id)


@pytest.mark.slow
def test_bench_peers_small(server_url):
    """`bench peers` end to end on 5k chunks: pyrecall's part always; each peer either measured
    (when installed: `pip install lancedb chromadb`) or reported as not installed - never a
    traceback. No figure is asserted."""
    import importlib.util

    result = CliRunner().invoke(main, [
        "bench", "peers", "--chunks", "5000", "--agents", "10", "--queries", "5",
        "--json", "--quiet", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["chunks"] >= 5000 and report["n_queries"] > 0
    ours = report["pyrecall"]
    for method in ("exact", "ann", "hybrid_recall", "session_recall"):
        assert 0 < ours[method]["p50"] <= ours[method]["p95"] <= ours[method]["p99"]
    assert _in_unit(ours["ann"]["recall@10"]) and _in_unit(ours["hybrid_recall"]["vector_arm_recall@10"])
    for peer, module, queries in (("lancedb", "lancedb", ("vector_filtered", "vector_filtered_refined")),
                                  ("chroma", "chromadb", ("vector_filtered",))):
        if importlib.util.find_spec(module) is None:
            assert "not installed" in report[peer]["error"]
        else:
            for q in queries:
                assert _in_unit(report[peer][q]["recall@10"]) and report[peer][q]["p50"] > 0


def test_real_units_turns_and_sentences():
    from pyrecall.bench import real_ann

    units, questions = real_ann.read_units(SAMPLE)
    turns, same = real_ann.read_units(SAMPLE, sentences=False)
    assert same == questions and len(questions) == 13 and len(set(units)) == len(units)
    assert set(turns) < set(units)                      # the turns, and sentences of longer ones
    extra = [u for u in units if u not in turns]
    assert extra and all(len(u.split()) >= 3 and any(u in t for t in turns) for u in extra)


def test_bench_ann_on_real_embeddings_small(server_url):
    """The real-embedding check end to end on our LoCoMo-format sample (30 texts: below an own
    index, so the exact scan answers and recall is 1.0 whatever the width)."""
    result = CliRunner().invoke(main, [
        "bench", "ann", "--data", str(SAMPLE), "--ef-search", "10,40", "--json", "--quiet",
        "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["units"], report["questions"], report["ef_values"]) == (30, 13, [10, 40])
    for name in ("real", "topic"):
        r = report[name]
        assert r["chunks"] == 30 and r["queries"] == 13 and "path exact (30 rows)" in r["path"]
        assert r["arm_recall@10"] == 1.0 and r["recall@10_by_ef_search"] == {"10": 1.0, "40": 1.0}
        assert -1 <= r["similarity"]["top10"] <= r["similarity"]["top1"] <= 1


@pytest.mark.parametrize("value, message", [("10,x", "expected widths like"), ("0,40", "between 1 and 1000")])
def test_bench_ann_bad_widths_are_usage_errors(value, message):
    result = CliRunner().invoke(main, ["bench", "ann", "--data", str(SAMPLE), "--ef-search", value])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.parametrize("centres", ["random", "model"])
def test_bench_mcp_small(server_url, centres):
    """`bench mcp`, small: the MCP server started for the largest agent answers every timed
    recall call over stdio; the report has its shape (no time asserted). Random topic centres
    put every query beyond ann_far_distance (the far pass); the model's put them near."""
    pytest.importorskip("mcp")
    result = CliRunner().invoke(main, ["bench", "mcp", "--chunks", "300", "--agents", "2",
                                       "--calls", "5", "--warmup", "2", "--centres", centres,
                                       "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["chunks"] >= 300 and report["agent"] == "agent-00000"
    distance = report["queries"]
    assert distance["ann_far_distance"] == 0.75
    if centres == "random":
        assert distance["far_share"] == 1.0 and distance["best_distance_p50"] > 0.75
    else:
        assert distance["far_share"] == 0.0 and distance["best_distance_p50"] < 0.7
    assert report["recall_ms"]["n"] == 5 and report["rows_per_call"] > 0
    assert report["sources"] == ["hybrid"]
    parts = report["parts"]
    for stats in (report["recall_ms"], parts["embed_ms"], parts["hybrid_recall_ms"],
                  parts["hybrid_recall_unbound_ms"]):
        assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]


def test_bench_mcp_context_tool(server_url):
    """`bench mcp --tool context`: the session-start context tool timed from the client, and
    recall.auto_context in-process, bound and unbound; every call answered."""
    pytest.importorskip("mcp")
    result = CliRunner().invoke(main, ["bench", "mcp", "--chunks", "300", "--calls", "7", "--warmup", "1",
                                       "--tool", "context", "--budget", "500", "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tool"] == "context" and report["token_budget"] == 500 and "recall_ms" not in report
    assert report["context_ms"]["n"] == 7 and report["rows_per_call"] > 0
    assert report["sources"] == ["hybrid"]
    parts = report["parts"]
    assert set(parts) == {"embed_ms", "auto_context_ms", "auto_context_unbound_ms"}
    for stats in (report["context_ms"], *parts.values()):
        assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"] and stats["n"] == 7


def test_generated_sessions_are_claude_code_transcripts_of_about_50_chunks(db_url, tmp_path):
    # the generator of `pyrecall bench index`: deterministic, read by the Claude Code importer
    from pyrecall import _db, _sync
    from pyrecall.bench.sessions import write_sessions

    paths = write_sessions(tmp_path / "a", 4, seed=3)
    again = write_sessions(tmp_path / "b", 4, seed=3)
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]
    with _db.connect(db_url) as conn:
        report = _sync.index(conn, [tmp_path / "a"], agent_id="bench")
        assert (report.count("new"), report.count("failed"), report.problems) == (4, 0, [])
        per_session, kinds = conn.execute(
            "select count(*)::float / count(distinct session_id), array_agg(distinct kind order by kind) "
            "from recall.chunks").fetchone()
        projects = conn.execute("select count(distinct project) from recall.sessions").fetchone()[0]
    assert 35 <= per_session <= 70
    assert kinds == ["code", "message", "thinking", "tool", "turn_pair"]
    assert projects >= 2


@pytest.mark.parametrize(("model", "backend"), [("local/all-MiniLM-L6-v2", "OnnxMiniLM"),
                                               ("local/all-MiniLM-L6-v2-int8", "OnnxMiniLM")])
def test_bench_index_small(server_url, model, backend):
    """`bench index`, small: one generated session imported, embedded with the local model,
    the raw model beside it, cold recalls in new processes; the report has its shape. With
    --model, that model embeds (the int8 MiniLM: bulk work on ONNX Runtime too)."""
    result = CliRunner().invoke(main, ["bench", "index", "--sessions", "1", "--sample", "64",
                                       "--runs", "1", "--model", model, "--dsn", server_url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sessions"] == 1 and report["chunks"] == report["embedded"] > 30
    assert report["model"] == model
    assert report["bulk_backend"] == backend and report["vacuumed"] is False
    # every text turn embedded on its own too (release 11), by default
    assert report["turn_vectors"] is True and report["turns_embedded"] > 10
    for key in ("pipeline_chunks_per_s", "raw_bulk_chunks_per_s", "raw_torch_chunks_per_s",
                "pipeline_chunks_per_cpu_s", "p95_ms_right_after_embed", "p95_ms_later"):
        assert report[key] > 0, key
    for run in ("cold_recall", "cold_auto_hook", "cold_help"):
        assert len(report[run]["runs_s"]) == 1 and report[run]["median_s"] > 0
        assert 0 < report[run]["median_cpu_s"] < 60, run


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_killed_benchmark_removes_its_throwaway_server(sig):
    """`kill` (or a closed terminal) ends a benchmark as Ctrl-C does: its throwaway embedded
    server is stopped and its directory removed, not left running in /tmp."""
    import signal
    import subprocess
    import sys
    import time

    from pyrecall import _db

    code = ("import sys, time\nfrom pyrecall.bench._scratch import scratch_database\n"
            "with scratch_database() as url:\n    print(url, flush=True)\n    time.sleep(120)\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        pgdata = Path(psycopg_host(url))
        assert pgdata.name == "pgdata" and _db.status(pgdata.parent).running, (url, proc.stderr.read())
        time.sleep(0.2)
        proc.send_signal(getattr(signal, sig))
        assert proc.wait(timeout=120) == 128 + getattr(signal, sig)
    finally:
        proc.kill()
    assert not pgdata.parent.exists()


def psycopg_host(url: str) -> str:
    import psycopg

    return psycopg.conninfo.conninfo_to_dict(url)["host"]
