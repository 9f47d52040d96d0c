"""The whole sleep story with the real MiniLM model: two waves, a merge, a contradiction.

Facts about Sam's bakery job arrive in two waves and end up in two groups; the pass merges
them; a scripted LLM finds the planted contradiction (night shifts, then morning shifts
only); the newer fact supersedes the older; a later search shows the link everywhere a
user looks, and ``current_only=True`` shows only the newer fact.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core.embeddings import SentenceTransformerEmbedder
from magnetic_langchain import MagneticEmbeddings, MagneticVectorStore, create_consolidation_chain
from magnetic_langchain.tools import SearchMemoryTool
from tests.langchain.test_consolidation import Responder, _pairs

pytestmark = pytest.mark.minilm

BACKGROUND = [
    "The Eiffel Tower is in Paris.",
    "Jupiter is the largest planet in the solar system.",
    "Python lists are mutable.",
    "My flight to Lisbon leaves at 9 on Friday.",
    "Aphids damage rose bushes in spring.",
    "The stock market fell sharply today.",
]
OLDER = "Sam works night shifts at the bakery."
NEWER = "Sam now works only morning shifts at the bakery."
WAVE_1 = [
    OLDER,
    "Sam bakes sourdough bread at the bakery.",
    "Sam has been a baker at the corner bakery for years.",
    "At the bakery Sam makes croissants and rye loaves.",
]
WAVE_2 = [
    "Sam's manager at the bakery set his new shift schedule.",
    "Sam likes his early bakery shifts because he is home by noon.",
    "Sam's shifts at the bakery start at 5 am.",
    NEWER,
]


def _night_vs_morning(messages: list[BaseMessage]) -> str:
    return json.dumps({"contradictions": _pairs(messages, ("night shifts", "morning shifts"))})


def test_two_waves_merge_and_the_newer_fact_supersedes(
    minilm: SentenceTransformerEmbedder, tmp_path: Path
):
    # A strict join threshold, as a store tuned for precise groups would have.
    mem = MagneticMemory(
        path=str(tmp_path / "sam"), embedder=minilm, config=MemoryConfig(join_threshold=0.7)
    )
    store = MagneticVectorStore(MagneticEmbeddings(minilm), memory=mem)
    try:
        store.add_texts(BACKGROUND)
        store.add_texts(WAVE_1, ids=[f"w1-{i}" for i in range(4)])
        time.sleep(0.01)
        store.add_texts(WAVE_2, ids=[f"w2-{i}" for i in range(4)])
        topic = [f"w1-{i}" for i in range(4)] + [f"w2-{i}" for i in range(4)]
        before = {c.group_id for c in mem.get(topic)}
        assert len(before) == 2, "the two waves form two groups"

        model = Responder(respond=_night_vs_morning)
        result = create_consolidation_chain(store, model).invoke({})
        assert result.ok and result.report is not None and result.report.merges
        assert len({c.group_id for c in mem.get(topic)}) == 1, "the pass merged them"
        assert [{c.a, c.b} for c in result.contradictions] == [{"w1-0", "w2-3"}]
        assert result.superseded == (("w1-0", "w2-3"),)

        old, new = mem.get(["w1-0", "w2-3"])
        assert old.text == OLDER and old.superseded_by == "w2-3" and new.superseded_by is None

        query = "Which shifts does Sam work at the bakery?"
        docs = store.similarity_search(query, k=8, include_group_metadata=True)
        by_id = {d.id: d for d in docs}
        assert by_id["w1-0"].metadata["magnetic_superseded_by"] == "w2-3"
        assert by_id["w2-3"].metadata["magnetic_supersedes"] == ["w1-0"]
        plain = store.similarity_search(query, k=8)
        assert all("magnetic_superseded_by" not in d.metadata for d in plain)  # opt-in

        text = SearchMemoryTool(store=store).invoke({"query": query, "k": 8})
        # The agent's search tool reads current memories: the newer fact, with its link.
        line = next(x for x in text.splitlines() if NEWER in x)
        assert "supersedes id=w1-0" in line and OLDER not in text

        current = store.similarity_search(query, k=8, current_only=True)
        texts = [d.page_content for d in current]
        assert NEWER in texts and OLDER not in texts
    finally:
        mem.close()
