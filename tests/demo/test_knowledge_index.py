"""The BM25 knowledge ranker finds the right runbook for English and Chinese questions."""

from __future__ import annotations

import pytest

from diagnosis.demo import SCENARIOS_DIR, load_scenario_meta, runbook_files, shipped_scenarios
from diagnosis.tools.knowledge_index import Chunk, KnowledgeIndex, chunk_markdown, tokenize


@pytest.fixture(scope="module")
def index() -> KnowledgeIndex:
    chunks = []
    for path in runbook_files():
        chunks += chunk_markdown(path.relative_to(SCENARIOS_DIR), path.read_text(encoding="utf-8"))
    return KnowledgeIndex.build(chunks)


def top_scenario(index: KnowledgeIndex, query: str) -> str:
    (chunk, _score), *_ = index.search(query, top_k=1)
    return chunk.path.split("/")[0]


# --- tokenizer ----------------------------------------------------------------------------------


def test_the_tokenizer_keeps_hyphenated_names_whole_and_in_parts():
    tokens = tokenize("payment-service")
    assert tokens[0] == "payment-service" and {"payment", "service"} <= set(tokens)


def test_the_tokenizer_keeps_short_technical_words_and_drops_question_words():
    tokens = tokenize("Why is the OOM rate of 5xx so high?")
    assert {"oom", "5xx", "rate", "high"} <= set(tokens)
    assert not {"why", "is", "the", "so"} & set(tokens)


def test_the_tokenizer_splits_camel_case_and_dotted_names():
    tokens = set(tokenize("java.lang.OutOfMemoryError"))
    assert {"java.lang.outofmemoryerror", "outofmemoryerror", "memory", "error"} <= tokens


def test_the_tokenizer_makes_cjk_bigrams_and_keeps_a_lone_character():
    assert tokenize("连接池耗尽") == ["连接", "接池", "池耗", "耗尽"]
    assert tokenize("主 库") == ["主", "库"]
    assert tokenize("order-service内存泄漏") == ["order-service", "order", "service", "内存", "存泄", "泄漏"]


def test_the_tokenizer_matches_simple_plurals_and_verb_forms():
    assert set(tokenize("timeouts failing queries")) == set(tokenize("timeout fail query"))


# --- search -------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario, query", [
    ("payment-db-pool-exhaustion", "HikariPool Connection is not available, request timed out after 30000ms"),
    ("order-memory-leak-oom", "java.lang.OutOfMemoryError Java heap space OOMKilled"),
    ("inventory-disk-full", "No space left on device when writing the journal"),
    ("cart-checkout-shared-redis", "OOM command not allowed when used memory > 'maxmemory'"),
    ("user-slow-downstream", "slow query rows_examined full table scan missing index"),
    ("report-noisy-neighbour-cpu", "noisy neighbour CPU pressure BestEffort pod"),
])
def test_an_english_error_text_ranks_its_runbook_first(index, scenario, query):
    assert top_scenario(index, query) == scenario


@pytest.mark.parametrize("scenario, query", [
    ("payment-db-pool-exhaustion", "数据库连接池耗尽，请求排队超时"),
    ("order-memory-leak-oom", "堆内存持续增长，内存泄漏导致容器重启"),
    ("inventory-disk-full", "磁盘空间耗尽，日志轮转失败"),
    ("settlement-replication-lag-zh", "主从同步延迟，从库读取到过期数据"),
    ("report-noisy-neighbour-cpu", "节点 CPU 争用，吵闹邻居"),
    ("cart-checkout-shared-redis", "结账和购物车同时报错"),
])
def test_a_chinese_question_without_service_names_ranks_its_runbook_first(index, scenario, query):
    assert top_scenario(index, query) == scenario


@pytest.mark.parametrize("path", shipped_scenarios(), ids=[p.name for p in shipped_scenarios()])
def test_both_default_questions_of_every_scenario_rank_its_runbook_first(index, path):
    question = load_scenario_meta(path)["default_question"]
    assert top_scenario(index, question["en"]) == path.name
    assert top_scenario(index, question["zh"]) == path.name


def test_results_are_ordered_by_score_and_limited_to_top_k(index):
    results = index.search("payment-service connection pool", top_k=4)
    assert len(results) == 4
    scores = [score for _, score in results]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_excluded_chunks_are_never_returned(index):
    first = index.search("payment-service connection pool", top_k=3)
    excluded = [chunk.chunk_id for chunk, _ in first]
    second = index.search("payment-service connection pool", top_k=3, exclude_chunk_ids=excluded)
    assert second and not {chunk.chunk_id for chunk, _ in second} & set(excluded)
    assert second[0][1] <= first[-1][1]


def test_excluding_unknown_ids_is_harmless(index):
    assert index.search("disk full", top_k=2, exclude_chunk_ids=["nope#1"]) == index.search("disk full", top_k=2)


def test_an_empty_query_returns_nothing(index):
    assert index.search("", top_k=5) == []
    assert index.search("   ?!  ", top_k=5) == []
    assert index.search("why is it so", top_k=5) == []


def test_a_query_with_no_matching_term_returns_nothing(index):
    assert index.search("zzqx", top_k=5) == []


def test_an_empty_index_returns_nothing():
    assert KnowledgeIndex.build([]).search("anything", top_k=3) == []


def test_top_k_must_be_positive(index):
    with pytest.raises(ValueError, match="top_k"):
        index.search("disk", top_k=0)


def test_duplicate_chunk_ids_are_rejected():
    chunk = Chunk("a#0", "runbook", "a", "A", "a.md", "text")
    with pytest.raises(ValueError, match="a#0"):
        KnowledgeIndex.build([chunk, chunk])


def test_the_search_is_deterministic_for_equal_scores():
    chunks = [Chunk(f"doc{i}#0", "case", f"doc{i}", "same", f"doc{i}", "disk full") for i in (3, 1, 2)]
    index = KnowledgeIndex.build(chunks)
    assert [c.chunk_id for c, _ in index.search("disk", top_k=3)] == ["doc1#0", "doc2#0", "doc3#0"]


def test_lookup_by_chunk_id(index):
    chunk = index.chunks[0]
    assert index.get(chunk.chunk_id) == chunk and index.get("missing") is None


# --- Markdown chunking --------------------------------------------------------------------------

DOC = """# Redis runbook

Intro paragraph.

## Symptoms

Writes fail.

### Detail

Still symptoms.

## Remediation

```
## not a heading inside a fence
```
Raise maxmemory.
"""


def test_markdown_is_split_by_level_two_headings_and_every_chunk_carries_the_title():
    chunks = chunk_markdown("x/redis.md", DOC)
    assert [c.chunk_id for c in chunks] == ["x/redis.md#0", "x/redis.md#1", "x/redis.md#2"]
    assert {c.title for c in chunks} == {"Redis runbook"}
    assert chunks[0].content == "Intro paragraph."
    assert chunks[1].content.startswith("## Symptoms") and "### Detail" in chunks[1].content
    assert "## not a heading inside a fence" in chunks[2].content
    assert all(c.source_type == "runbook" and c.source_id == "x/redis.md" and c.path == "x/redis.md" for c in chunks)


def test_markdown_chunks_accept_a_source_type_and_id():
    (chunk, *_) = chunk_markdown("case.md", DOC, source_type="case", source_id="case-7")
    assert chunk.source_type == "case" and chunk.chunk_id == "case-7#0"


def test_a_long_section_is_split_and_keeps_its_heading():
    text = "# T\n\n## Big\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(20))
    chunks = chunk_markdown("big.md", text, max_chars=800)
    assert len(chunks) > 3
    assert all(c.content.startswith("## Big") and len(c.content) <= 800 for c in chunks)
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def test_a_document_without_a_title_uses_its_first_line():
    (chunk,) = chunk_markdown("notes/plain.md", "Just some notes\nabout disks.")
    assert chunk.title == "Just some notes"
    (empty,) = chunk_markdown("notes/empty.md", "")
    assert empty.title == "empty"


def test_every_shipped_runbook_chunks_into_titled_sections():
    for path in runbook_files():
        chunks = chunk_markdown(path.relative_to(SCENARIOS_DIR), path.read_text(encoding="utf-8"))
        assert len(chunks) >= 3
        assert all(c.title and not c.title.startswith("#") for c in chunks)
