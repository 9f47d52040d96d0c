"""What one search returns: restricted to ids, re-ranked by MMR, expanded with group mates."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core._search.search import SearchPlan
from magnetic_core._search.selection import Selection, select_hits

from .clustered import unit

ALL = 1000
OFF = dict(entity_boost=0.0, lexical_weight=0.0, n_probe=ALL)


def _mmr_reference(q, vectors, k, lam) -> list[int]:
    """Plain MMR: each step the best lam * relevance - (1 - lam) * max similarity to picks."""
    picked: list[int] = []
    while len(picked) < min(k, len(vectors)):
        best, best_score = -1, -np.inf
        for i in range(len(vectors)):
            if i in picked:
                continue
            red = max((float(vectors[i] @ vectors[j]) for j in picked), default=0.0)
            score = (
                lam * float(vectors[i] @ q) - (1 - lam) * red if picked else float(vectors[i] @ q)
            )
            if score > best_score + 1e-9:
                best, best_score = i, score
        picked.append(best)
    return picked


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7])
def test_mmr_picks_k_of_the_fetch_k_best_as_the_reference_does(store, lam: float):
    q = unit(np.random.default_rng(0))
    fetched = store.exact(q, 20)
    hits = store.mem.search(vector=q, k=6, mmr_lambda=lam, fetch_k=20, **OFF)
    vectors = store.vectors[[store.ids.index(c) for c in fetched]]
    assert [h.id for h in hits] == [fetched[i] for i in _mmr_reference(q, vectors, 6, lam)]
    assert hits[0].id == fetched[0]  # the first pick is the most relevant


def test_mmr_with_relevance_only_is_the_plain_ranking(store):
    q = unit(np.random.default_rng(1))
    plain = store.mem.search(vector=q, k=5, **OFF)
    assert [h.id for h in store.mem.search(vector=q, k=5, mmr_lambda=1.0, **OFF)] == [
        h.id for h in plain
    ]


def test_expansion_adds_group_mates_closest_to_the_centroid_never_twice(store):
    q = unit(np.random.default_rng(2))
    hits = store.mem.search(vector=q, k=3, expand=2, filter={"even": True}, **OFF)
    index = store.mem._index
    seen: list[str] = []
    current = None
    for h in hits:
        assert h.id not in seen
        seen.append(h.id)
        assert h.metadata["even"] is True
        if h.expanded_from is None:
            current = h
            continue
        assert h.expanded_from == current.id and h.group_id == current.group_id
        assert h.score == pytest.approx(float(store.vectors[store.ids.index(h.id)] @ q), abs=1e-6)
    heads = [h for h in hits if h.expanded_from is None]
    assert [h.id for h in heads] == store.exact(q, 3, [c for c in store.ids if int(c[1:]) % 2 == 0])
    for head in heads:
        group = index.loc[head.id]
        mates = [h.id for h in hits if h.expanded_from == head.id]
        centroid = index.centroids[group.slot]
        shown_before = {h.id for h in hits[: hits.index(head)]} | {x.id for x in heads}
        allowed = [c for c in group.ids if c not in shown_before and int(c[1:]) % 2 == 0]
        want = sorted(allowed, key=lambda c: -float(index.vector(c) @ centroid))[:2]
        assert mates == want


def test_restriction_scores_only_the_named_cells_that_pass_the_filter(store):
    index, catalog = store.mem._index, store.mem._catalog
    q = unit(np.random.default_rng(3))
    plan = SearchPlan(vector=q, k=4, n_probe=1, entities=(), entity_boost=0.0,
                      predicate=lambda m: m["n"] % 3 == 0, exclude=frozenset({"c0"}))  # fmt: skip
    named = [f"c{i}" for i in range(30)] + ["ghost"]
    hits = select_hits(index, catalog, plan, Selection(ids=tuple(named)), explain=False)
    allowed = [f"c{i}" for i in range(3, 30, 3)]  # c0 excluded, ghost missing
    assert [h.id for h in hits] == store.exact(q, 4, allowed)


def test_restriction_mmr_and_expansion_combine_in_one_call(store):
    q = unit(np.random.default_rng(4))
    among = store.ids[:60]
    hits = store.mem.search(vector=q, k=3, ids=among, mmr_lambda=0.5, fetch_k=10, expand=1)
    heads = [h for h in hits if h.expanded_from is None]
    assert len(heads) == 3 and {h.id for h in heads} <= set(store.exact(q, 10, among))
    assert len({h.id for h in hits}) == len(hits)


def test_a_plain_search_has_the_selection_its_arguments_validate_to(store):
    # The facade keeps one selection per k for searches without ids, expand, MMR or
    # fetch_k: it must be the one validating those arguments gives, for each k, and
    # arguments of the wrong type must still be refused.
    from magnetic_core.errors import InvalidInputError
    from magnetic_core.memory import _selection

    for k in (1, 5, 40, 5):
        assert _selection(k, None, 0, None, None) == Selection(fetch_k=4 * k)
    q = unit(np.random.default_rng(3))
    assert len(store.mem.search(vector=q, k=3, **OFF)) == 3
    assert len(store.mem.search(vector=q, k=7, **OFF)) == 7
    for bad in (False, 0.0, -1):
        with pytest.raises(InvalidInputError, match="expand"):
            store.mem.search(vector=q, k=3, expand=bad, **OFF)


def test_a_plain_vector_query_gets_the_hits_the_staged_search_gives(tmp_path, monkeypatch):
    """A query vector with every other argument left alone is answered by one compiled
    call and hits built straight from it (``plain_search``, ``plain_hits``): the same
    cells, scores, groups, labels and metadata as the staged search, before and after a
    write; with any other argument, the staged search answers."""
    from dataclasses import replace

    from magnetic_core import MagneticMemory, MemoryConfig
    from magnetic_core import memory as memory_module
    from magnetic_core.embeddings import VectorsOnly
    from magnetic_core.eval import clustered_data

    rng = np.random.default_rng(3)
    dim, n = 32, 6000
    vecs, _ = clustered_data(n, dim, 40, spread=0.8, decay=1.5, seed=3)
    ids = [f"c{i}" for i in range(n)]
    metas = [{"i": i, "tag": f"t{i % 7}"} for i in range(n)]
    config = MemoryConfig(sketch_rank=8, max_group_size=128)
    answered: list[bool] = []
    probes: list[int] = []
    one_call = memory_module.plain_search

    def counted(*args):  # type: ignore[no-untyped-def]
        found = one_call(*args)
        answered.append(found is not None)
        probes.append(args[2].n_probe)
        return found

    monkeypatch.setattr(memory_module, "plain_search", counted)
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(dim), config=config) as mem:
        mem.add([f"note {i}" for i in range(n)], ids=ids, metadatas=metas, vectors=vecs)
        queries = [unit(rng, dim) for _ in range(12)]

        def same(q: np.ndarray, k: int) -> None:
            plain = mem.search(vector=q, k=k)
            staged = mem.search(vector=q, k=k, explain=True)  # routes: the staged search
            assert [(h.id, h.score, h.rank_score, h.group_id) for h in plain] == [
                (h.id, h.score, h.rank_score, h.group_id) for h in staged
            ]
            assert [h.cell for h in plain] == [h.cell for h in staged]
            assert [h.group_label for h in plain] == [h.group_label for h in staged]
            assert all(h.route is None and h.expanded_from is None for h in plain)

        for q in queries:
            same(q, 10)
        same(queries[0], 1)
        assert answered and all(answered)
        # Hits are copies: changing one's metadata changes nothing stored.
        hit = mem.search(vector=queries[0], k=1)[0]
        hit.metadata["i"] = -1
        assert mem.get([hit.id])[0].metadata["i"] == int(hit.id[1:])
        # A write to the groups a query probes is seen by the next search, either way.
        near = mem.search(vector=queries[1], k=3)
        mem.add(["new note"], ids=["new"], vectors=[mem.get_vectors([near[0].id])[0]])
        assert "new" in [h.id for h in mem.search(vector=queries[1], k=3)]
        same(queries[1], 10)
        # A new config is read by the next query.
        mem.config = replace(mem.config, n_probe=3, probe_cells=0)
        same(queries[3], 10)
        assert probes[-1] == 3 and answered[-1]
        # Any other argument goes the staged way (its checks included).
        answered.clear()
        mem.search(vector=queries[2], k=5, filter={"tag": "t1"})
        mem.search(vector=queries[2], k=5, expand=1)
        assert answered == []
        with pytest.raises(Exception, match="expand"):
            mem.search(vector=queries[2], k=5, expand=0.0)


def test_a_plain_text_query_gets_the_hits_the_staged_search_gives(tmp_path, monkeypatch):
    """A text query with its vector and ``k``, nothing else, is answered by one compiled
    call after its entity stage, hits built straight from it (``text_search``): the same
    cells, cosines, ranking scores, groups, labels and metadata as the staged search, for
    queries naming a rare entity and words, before and after a write. With a filter, a
    route asked for or an expansion, the staged search answers."""
    from magnetic_core import MagneticMemory, MemoryConfig
    from magnetic_core import memory as memory_module
    from magnetic_core.embeddings import VectorsOnly
    from magnetic_core.eval import clustered_data

    rng = np.random.default_rng(5)
    dim, n = 32, 6000
    vecs, _ = clustered_data(n, dim, 40, spread=0.8, decay=1.5, seed=5)
    words = ["harbour", "crane", "ledger", "tariff", "barley", "copper"]
    texts = [
        f"Shipment {i} to Rotterdam: {' '.join(rng.choice(words, 2))}"
        if i % 29 == 0
        else f"note {i} about {rng.choice(words)}"
        for i in range(n)
    ]
    metas = [{"i": i, "tag": f"t{i % 7}"} for i in range(n)]
    config = MemoryConfig(sketch_rank=8, max_group_size=128)
    answered: list[bool] = []
    one_call = memory_module.text_search

    def counted(*args):  # type: ignore[no-untyped-def]
        found = one_call(*args)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(memory_module, "text_search", counted)
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(dim), config=config) as mem:
        mem.add(texts, ids=[f"c{i}" for i in range(n)], metadatas=metas, vectors=vecs)
        queries = [unit(rng, dim) for _ in range(12)]
        asked = ["Rotterdam copper", "crane ledger", "barley in Rotterdam", "tariff"]

        def same(text: str, q: np.ndarray, k: int) -> None:
            one = mem.search(text, vector=q, k=k)
            staged = mem.search(text, vector=q, k=k, explain=True)  # routes: the stages
            assert [(h.id, h.score, h.rank_score, h.group_id) for h in one] == [
                (h.id, h.score, h.rank_score, h.group_id) for h in staged
            ]
            assert [h.cell for h in one] == [h.cell for h in staged]
            assert [h.group_label for h in one] == [h.group_label for h in staged]
            assert all(h.route is None and h.expanded_from is None for h in one)

        for j, q in enumerate(queries):
            same(asked[j % 4], q, 10)
        same(asked[0], queries[0], 1)
        assert answered and all(answered)
        # Words and the entity move the ranking: the ranking scores are not the cosines.
        hits = mem.search(asked[0], vector=queries[0], k=10)
        assert any(h.rank_score != h.score for h in hits)
        # A write to the groups a query probes is seen by the next search, either way.
        mem.add(
            ["Rotterdam copper tariff"], ids=["new"], vectors=[mem.get_vectors([hits[0].id])[0]]
        )
        assert "new" in [h.id for h in mem.search(asked[0], vector=queries[0], k=3)]
        same(asked[0], queries[0], 10)
        # Any other argument goes the staged way.
        answered.clear()
        mem.search(asked[1], vector=queries[2], k=5, filter={"tag": "t1"})
        mem.search(asked[1], vector=queries[2], k=5, expand=1)
        mem.search(asked[1], vector=queries[2], k=5, mmr_lambda=0.5)
        assert not any(answered)
