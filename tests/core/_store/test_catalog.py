"""Cell records, the entity index, group labels and the BM25 lexical index."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from magnetic_core._store.catalog import Catalog, CellRecord
from magnetic_core._text.lexical import LexicalIndex


def _record(text: str, entities: tuple[str, ...] = ()) -> CellRecord:
    return CellRecord(text=text, metadata={}, entities=entities, created_at=0.0, updated_at=0.0)


def test_entity_index_follows_puts_and_drops():
    cat = Catalog()
    cat.put("a", _record("see deploy.sh", ("deploy.sh",)))
    cat.put("b", _record("also deploy.sh and ada@x.org", ("deploy.sh", "ada@x.org")))
    assert cat.cells_with(["deploy.sh"], max_share=1.0) == {"a", "b"}
    cat.put("b", _record("now only ada@x.org", ("ada@x.org",)))  # upsert replaces
    assert cat.cells_with(["deploy.sh"], max_share=1.0) == {"a"}
    cat.drop("a")
    assert cat.cells_with(["deploy.sh"], max_share=1.0) == set()
    assert "deploy.sh" not in cat.entity_cells


def _numbers_by_id(cat: Catalog) -> dict[str, list[int]]:
    """Each entity's document numbers looked up by id, as a search once did per query."""
    return {
        e: sorted(cat.lexical.numbers(sorted(cells)).tolist())
        for e, cells in cat.entity_cells.items()
    }


def test_entity_numbers_follow_puts_upserts_drops_and_renumbering():
    rng = random.Random(5)
    names = [f"name{i}" for i in range(30)]
    cat = Catalog()
    first_numbering = cat.lexical.numbering
    live: list[str] = []
    asked = 0
    for step in range(6000):
        if live and rng.random() < (0.7 if step > 3000 else 0.3):
            cid = live.pop(rng.randrange(len(live)))
            cat.drop(cid)
        else:
            cid = f"c{rng.randrange(2500)}"  # an id may come back: an upsert
            if cid not in live:
                live.append(cid)
            ents = tuple(rng.sample(names, rng.randrange(4)))
            cat.put(cid, _record(f"text {step}", ents))
        if step % 97 == 0:  # asked for now and then, so kept through the changes between
            asked += 1
            for entity, want in _numbers_by_id(cat).items():
                got = cat.entity_docs(entity)
                assert got.dtype == np.int64 and got.tolist() == want, (step, entity)
    assert asked > 50
    # the drops after step 3000 left under half the numbers live: the index renumbered
    assert cat.lexical.numbering != first_numbering
    for entity, want in _numbers_by_id(cat).items():
        assert cat.entity_docs(entity).tolist() == want
    assert cat.entity_docs("nobody").shape == (0,)
    got = cat.entity_docs(names[0])
    got[:] = -5  # the caller's own copy
    assert cat.entity_docs(names[0]).tolist() == _numbers_by_id(cat).get(names[0], [])
    cat.clear()
    assert cat.entity_docs(names[0]).shape == (0,)


def test_entities_in_too_many_cells_do_not_route():
    cat = Catalog()
    for i in range(400):
        cat.put(str(i), _record(f"note {i} from reuters", ("reuters",)))
    cat.put("x", _record("rare thing", ("zebra.py",)))
    assert cat.cells_with(["reuters"], max_share=0.05) == set()
    assert cat.cells_with(["zebra.py", "reuters"], max_share=0.05) == {"x"}


def test_labels_name_what_is_characteristic_and_follow_versions():
    cat = Catalog()
    for i in range(30):
        cat.put(f"n{i}", _record(f"the weekly market report number {i}"))
    members = []
    for i, text in enumerate(["sourdough bread rises", "bread dough and sourdough", "bread oven"]):
        cat.put(f"b{i}", _record(text))
        members.append(f"b{i}")
    label, _ = cat.label("g1", 1, members)
    assert label.split(" / ")[0] in {"bread", "sourdough"}
    assert "market" not in label
    cat.put("b3", _record("pizza pizza pizza pizza"))
    assert cat.label("g1", 1, [*members, "b3"])[0] == label  # same version: cached
    assert "pizza" in cat.label("g1", 2, ["b3"])[0]


def test_bm25_ranks_rare_query_words_and_forgets_removed_cells():
    lex = LexicalIndex()
    lex.add("a", "mutations in the BRCA1 gene raise cancer risk")
    lex.add("b", "the gene for eye colour")
    lex.add("c", "cancer screening programmes")
    ids, scores = lex.top(lex.query_terms("BRCA1 gene"), 3)
    assert ids[0] == "a"
    assert list(scores) == sorted(scores, reverse=True)
    lex.remove("a")
    ids, _ = lex.top(lex.query_terms("BRCA1 gene"), 3)
    assert "a" not in ids and ids[0] == "b"
    lex.add("b", "now about something else entirely")  # re-index replaces the old words
    ids, _ = lex.top(lex.query_terms("eye colour"), 3)
    assert "b" not in ids
    assert len(lex) == 2


def test_words_in_most_cells_are_skipped_by_bm25():
    lex = LexicalIndex()
    for i in range(40):
        lex.add(str(i), f"common word plus token{i}")
    docs, _ = lex.scores(lex.query_terms("common"))
    assert docs.size == 0  # in every cell: no lexical signal, no cost
    ids, _ = lex.top(lex.query_terms("common token7"), 3)
    assert ids == ["7"]


def _bm25_by_hand(texts: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75):
    from magnetic_core._text.tokenize import terms

    docs = {cid: terms(t) for cid, t in texts.items()}
    n = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n
    out: dict[str, float] = {}
    for term in dict.fromkeys(terms(query)):
        holders = [cid for cid, d in docs.items() if term in d]
        if not holders or len(holders) > 0.5 * n:
            continue
        idf = math.log(1 + (n - len(holders) + 0.5) / (len(holders) + 0.5))
        for cid in holders:
            tf = docs[cid].count(term)
            norm = k1 * (1 - b + b * len(docs[cid]) / avgdl)
            out[cid] = out.get(cid, 0.0) + idf * (k1 + 1) * tf / (tf + norm)
    return out


@pytest.mark.parametrize("query", ["rare1 rare2", "alpha beta gamma rare3"])
def test_bm25_scores_match_the_formula_for_short_and_long_queries(query):
    # "rare" words touch few cells (sorted merge); alpha/beta/gamma touch most of the
    # store (the dense merge): both give the formula's scores.
    rng = random.Random(4)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    texts = {
        f"c{i}": " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        + (f" rare{i % 7}" if i % 5 == 0 else "")
        for i in range(200)
    }
    lex = LexicalIndex()
    for cid, text in texts.items():
        lex.add(cid, text)
    docs, vals = lex.scores(lex.query_terms(query))
    got = {lex._cids[int(d)]: float(v) for d, v in zip(docs, vals)}
    want = _bm25_by_hand(texts, query)
    assert got.keys() == want.keys() and want
    for cid, score in want.items():
        assert got[cid] == pytest.approx(score, rel=1e-5)
