"""One ranking score from cosine, entity boost, BM25 and conversation context."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core import MagneticMemory
from magnetic_core._text.lexical import LexicalIndex
from magnetic_core.embeddings import VectorsOnly

from .clustered import RARE, unit

ALL = 1000  # n_probe over every group: the candidates are the whole store


def test_with_every_term_off_the_ranking_is_exact_cosine(store):
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = unit(rng)
        hits = store.mem.search(vector=q, k=10, n_probe=ALL, entity_boost=0.0, lexical_weight=0.0)
        assert [h.id for h in hits] == store.exact(q, 10)
        assert all(h.rank_score == pytest.approx(h.score) for h in hits)


def test_the_ranking_score_is_the_sum_of_its_terms_best_first(store):
    q = unit(np.random.default_rng(1))
    hits = store.mem.search("Ada Lovelace bakeries", vector=q, k=40, n_probe=ALL, explain=True,
                            entity_boost=0.2, lexical_weight=0.5)  # fmt: skip
    assert len(hits) == 40
    for h in hits:
        r = h.route
        assert r is not None
        assert h.rank_score == pytest.approx(h.score + r.boost + r.lexical + r.context, abs=1e-5)
    ranks = [h.rank_score for h in hits]
    assert ranks == sorted(ranks, reverse=True)


def test_the_entity_boost_goes_to_the_cells_holding_the_entity(store):
    q = unit(np.random.default_rng(2))
    hits = store.mem.search("Ada Lovelace", vector=q, k=len(store.ids), n_probe=ALL,
                            explain=True, entity_boost=0.25, lexical_weight=0.0)  # fmt: skip
    boosted = {h.id for h in hits if h.route and h.route.boost}
    assert boosted == {f"c{i}" for i in RARE}
    assert all(h.route.boost == pytest.approx(0.25) for h in hits if h.id in boosted)


def test_bm25_is_scaled_by_the_querys_best_so_the_weight_means_the_same(store):
    q = unit(np.random.default_rng(3))
    text = "castles bridges"
    docs, vals = store.mem._catalog.lexical.scores(LexicalIndex.query_terms(text))
    lexical = store.mem._catalog.lexical
    best = lexical.top_of(docs, vals, 1)[0][0]
    for weight in (0.2, 0.9):
        hits = store.mem.search(text, vector=q, k=len(store.ids), n_probe=ALL, explain=True,
                                entity_boost=0.0, lexical_weight=weight)  # fmt: skip
        terms = {h.id: h.route.lexical for h in hits if h.route}
        assert terms[best] == pytest.approx(weight)  # the best lexical match gains the weight
        got = lexical.lookup(list(terms), docs, vals) * (weight / float(vals.max()))
        np.testing.assert_allclose(list(terms.values()), got, atol=1e-6)


def test_a_filter_keeps_the_best_k_that_pass(store):
    q = unit(np.random.default_rng(4))
    hits = store.mem.search(vector=q, k=8, n_probe=ALL, filter={"even": True},
                            entity_boost=0.0, lexical_weight=0.0)  # fmt: skip
    even = [c for c in store.ids if int(c[1:]) % 2 == 0]
    assert [h.id for h in hits] == store.exact(q, 8, even)


def test_a_turn_next_to_the_best_match_is_lifted_into_the_results(tmp_path):
    rng = np.random.default_rng(5)
    dim = 16
    vecs = rng.standard_normal((40, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for answer in (13, 15):  # the turns around the match say nothing like the question
        vecs[answer] -= (vecs[answer] @ vecs[14]) * vecs[14]
        vecs[answer] /= np.linalg.norm(vecs[answer])
    metas = [{"session_id": f"s{i // 10}", "turn": i % 10} for i in range(40)]
    with MagneticMemory(path=str(tmp_path), embedder=VectorsOnly(dim)) as mem:
        mem.add([f"turn {i}" for i in range(40)], ids=[f"t{i}" for i in range(40)],
                metadatas=metas, vectors=vecs)  # fmt: skip
        q = vecs[14]  # the question matches turn 4 of session s1; its answer is turn 5
        plain = mem.search("question", vector=q, k=3, n_probe=ALL, context_weight=0.0,
                           session_weight=0.0, lexical_weight=0.0)  # fmt: skip
        lifted = mem.search("question", vector=q, k=3, n_probe=ALL, context_weight=0.9,
                            session_weight=0.0, lexical_weight=0.0, explain=True)  # fmt: skip
    assert plain[0].id == lifted[0].id == "t14"
    neighbours = {"t13", "t15"}
    assert not neighbours & {h.id for h in plain}
    assert neighbours <= {h.id for h in lifted}
    for h in lifted:
        if h.id in neighbours:
            assert h.route.context == pytest.approx(0.9 * 1.0, abs=1e-5)  # 0.9 x the best turn
