"""The hierarchy with the real all-MiniLM-L6-v2 model (offline package)."""

from __future__ import annotations

from collections import Counter

import pytest

from magnetic_core import MagneticMemory

from .minilm_corpus import CONCEPTS

pytestmark = pytest.mark.minilm


@pytest.fixture(scope="module")
def concept_memory(minilm, tmp_path_factory):
    texts, ids = [], []
    for i in range(10):  # interleaved, as memories arrive in real life
        for concept, items in CONCEPTS.items():
            texts.append(items[i])
            ids.append(f"{concept}-{i}")
    mem = MagneticMemory(path=str(tmp_path_factory.mktemp("minilm")), embedder=minilm)
    mem.add(texts, ids=ids)
    yield mem
    mem.close()


def _concept(cell_id: str) -> str:
    return cell_id.split("-")[0]


def test_related_texts_share_groups(concept_memory):
    groups = concept_memory.groups()
    assert concept_memory.stats().threshold_source == "calibrated"
    # No group mixes two concepts ...
    for info in groups:
        assert len({_concept(c) for c in info.cell_ids}) == 1, info
    # ... and each concept is mostly gathered, not scattered into singletons.
    for concept in CONCEPTS:
        sizes = [g.size for g in groups if _concept(g.cell_ids[0]) == concept]
        assert max(sizes) >= 4, (concept, sizes)
    assert len(groups) < 40 / 2


@pytest.mark.parametrize(
    "query, concept, words",
    [
        ("how long should the dough rise before baking?", "baking", {"bread", "dough", "loaf"}),
        ("who scored the winning goal?", "football", {"match", "soccer", "football", "striker"}),
        ("what did the central bank do with interest rates?", "finance", {"bank", "rates"}),
    ],
)
def test_a_concept_query_returns_its_cells_with_their_group(concept_memory, query, concept, words):
    hits = concept_memory.search(query, k=3, explain=True)
    assert [_concept(h.id) for h in hits] == [concept] * 3
    top = hits[0]
    assert top.group_id == concept_memory.get([top.id])[0].group_id
    assert words & set(top.group_label.replace("/", " ").split()), top.group_label
    assert "centroid" in top.route.stages
    majority = Counter(_concept(c) for c in concept_memory.group(top.group_id).cell_ids)
    assert majority.most_common(1)[0][0] == concept
