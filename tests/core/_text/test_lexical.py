"""BM25: the compiled scoring against the plain formula, and postings that stay writable."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetic_core._text.bm25 import bm25_pool
from magnetic_core._text.lexical import LexicalIndex

WORDS = [f"w{i}" for i in range(12)]


def _reference(texts: dict[str, list[str]], query: tuple[str, ...], k1=1.2, b=0.75):
    """BM25 as the textbook writes it (terms in more than half the cells skipped)."""
    n = len(texts)
    avgdl = sum(len(t) for t in texts.values()) / n
    out: dict[str, float] = {}
    for term in dict.fromkeys(query):
        df = sum(term in t for t in texts.values())
        if df == 0 or (n >= 20 and df > 0.5 * n):
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for cid, words in texts.items():
            tf = words.count(term)
            if tf:
                norm = k1 * (1 - b + b * len(words) / avgdl)
                out[cid] = out.get(cid, 0.0) + idf * (k1 + 1) * tf / (tf + norm)
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=40),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.sets(st.integers(0, 39), max_size=10),
)
def test_scores_equal_the_textbook_formula_after_adds_and_removes(docs, query, removed):
    lex = LexicalIndex()
    texts = {}
    for i, words in enumerate(docs):
        lex.add(f"d{i}", " ".join(words))
        texts[f"d{i}"] = words
    for i in sorted(removed):
        if f"d{i}" in texts and len(texts) > 1:
            lex.remove(f"d{i}")
            del texts[f"d{i}"]
    want = _reference(texts, tuple(query))
    ids, scores = lex.top(tuple(query), 100)
    assert set(ids) == set(want)
    for cid, score in zip(ids, scores.tolist(), strict=True):
        assert math.isclose(score, want[cid], rel_tol=1e-5)
    assert scores.tolist() == sorted(scores.tolist(), reverse=True)


def test_a_query_between_writes_leaves_the_postings_writable():
    lex = LexicalIndex()
    lex.add("a", "gene mutation")
    docs, vals = lex.scores(("gene",))
    lex.add("b", "gene folding")  # would fail if the query still held a view of the postings
    lex.remove("a")
    assert lex.top(("gene",), 5)[0] == ["b"]
    assert docs.tolist() == [0] and vals.shape == (1,)


def test_many_documents_take_the_dense_path_and_agree():
    lex = LexicalIndex()
    rng = np.random.default_rng(0)
    texts = {}
    for i in range(300):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), 6)]
        texts[f"d{i}"] = words
        lex.add(f"d{i}", " ".join(words))
    want = _reference(texts, ("w1", "w2", "w3"))
    docs, vals = lex.scores(("w1", "w2", "w3"))
    assert docs.tolist() == sorted(docs.tolist())
    got = dict(zip(lex.top_of(docs, vals, 1000)[0], lex.top_of(docs, vals, 1000)[1].tolist()))
    assert got.keys() == want.keys()
    assert all(math.isclose(got[c], want[c], rel_tol=1e-5) for c in want)


def test_an_index_from_snapshot_arrays_removes_and_compacts_like_one_built_by_adds():
    words = ["alpha", "beta", "gamma", "delta", "Berlin", "Paris", "gene", "BRCA1"]
    texts = {f"c{i}": f"{words[i % 8]} {words[(i * 3) % 8]} note {i}" for i in range(1100)}
    built = LexicalIndex()
    for cid, text in texts.items():
        built.add(cid, text)
    arrays = built.export_arrays()
    cids, terms = arrays.pop("cids").tolist(), arrays.pop("terms").tolist()
    opened = LexicalIndex.from_arrays(arrays, cids, terms)
    for i in range(0, 1100, 2):  # removes more than half: the index compacts itself
        built.remove(f"c{i}")
        opened.remove(f"c{i}")
    opened.add("new", "gene BRCA1 in Berlin")
    built.add("new", "gene BRCA1 in Berlin")
    assert len(opened) == len(built) == 551
    for query in ("BRCA1 Berlin", "alpha gamma", "note 7", "missing"):
        q = built.query_terms(query)
        assert opened.top(q, 20)[0] == built.top(q, 20)[0]
    live = [c for c in texts if c in built._docno] + ["new"]
    assert [opened._doc_terms[opened._docno[c]] for c in live] == [
        built._doc_terms[built._docno[c]] for c in live
    ]


def test_scores_read_in_place_then_after_a_compaction_equal_the_textbook_formula():
    """Each posting carries its document's length: a snapshot's postings, the per-term
    postings made at the first write, and those renumbered by a compaction all score as
    the formula does over the live texts."""
    from magnetic_core._text.tokenize import index_terms

    words = ["alpha", "beta", "gamma", "Berlin", "gene", "BRCA1", "folding", "walls"]
    texts = {
        f"c{i}": " ".join(words[(i * j) % 8] for j in range(1, 2 + i % 5)) for i in range(1300)
    }
    built = LexicalIndex()
    for cid, text in texts.items():
        built.add(cid, text)
    arrays = built.export_arrays()
    cids, terms = arrays.pop("cids").tolist(), arrays.pop("terms").tolist()
    lex = LexicalIndex.from_arrays(arrays, cids, terms)

    def check(live: dict[str, str]) -> None:
        stemmed = {c: index_terms(t) for c, t in live.items()}
        for query in ("gene folding", "alpha walls Berlin", "brca1"):
            q = lex.query_terms(query)
            want = _reference(stemmed, q)
            ids, scores = lex.top(q, len(live))
            assert set(ids) == set(want)
            for cid, score in zip(ids, scores.tolist(), strict=True):
                assert math.isclose(score, want[cid], rel_tol=1e-5)

    check(texts)  # the snapshot's flat postings
    for i in range(0, 1300, 3):
        lex.remove(f"c{i}")  # the first write makes per-term postings
        del texts[f"c{i}"]
    check(texts)
    for i in range(1, 1300, 3):
        lex.remove(f"c{i}")  # past half removed: renumbered
        del texts[f"c{i}"]
    lex.add("new", "gene folding walls walls")
    texts["new"] = "gene folding walls walls"
    check(texts)


def _term_reference(texts: dict[str, str], cids: list[str]) -> dict[str, tuple[int, int]]:
    """stem -> (cells among ``cids`` holding it, cells of the store holding it), plainly."""
    from magnetic_core._text.tokenize import index_terms

    held = {c: set(index_terms(t)) for c, t in texts.items()}
    stems = set().union(*(held[c] for c in cids)) if cids else set()
    return {s: (sum(s in held[c] for c in cids), sum(s in h for h in held.values())) for s in stems}


def test_group_term_counts_match_a_plain_count_in_every_state_of_the_index():
    from magnetic_core._text.tokenize import stem, terms

    texts = {
        f"c{i}": f"{['painted', 'painting', 'paint', 'studies', 'Berlin'][i % 5]} walls {i} "
        f"{'researched' if i % 3 else 'research'} notes"
        for i in range(40)
    }
    built = LexicalIndex()
    for cid, text in texts.items():
        built.add(cid, text)
    arrays = built.export_arrays()
    cids, vocab, surface = (arrays.pop(k).tolist() for k in ("cids", "terms", "surface"))
    opened = LexicalIndex.from_arrays(arrays, cids, vocab, surface)
    thawed = LexicalIndex.from_arrays(arrays, cids, vocab, surface)
    thawed.add("c0", texts["c0"])  # a write turns the flat arrays into postings
    words = {w for t in texts.values() for w in terms(t)}
    for sample in (["c1", "c2", "c6", "c11", "missing"], list(texts)[:25], []):
        want = _term_reference(texts, [c for c in sample if c in texts])
        for lex in (built, opened, thawed):
            shown, cells, df = lex.term_counts(sample)
            got = {stem(w): (int(c), int(d)) for w, c, d in zip(shown, cells, df, strict=True)}
            assert got == want
            assert set(shown) <= words  # words of the texts, never a bare stem like "studi"
    # The word that first brought a stem is shown ("painted", c0); a stem that is a word of
    # the texts itself shows as it is ("research", also c0).
    assert {"painted", "walls", "research"} <= set(built.term_counts(["c0"])[0])
    assert "studies" in opened.term_counts(["c3"])[0]
    # A term gone with its last cell takes its word with it.
    for cid in [c for c, t in texts.items() if "studies" in t]:
        built.remove(cid)
    assert "studi" not in built._surface and "studies" not in built.term_counts(list(texts))[0]


def test_document_numbers_name_cells_until_a_re_add_or_a_compaction_renumbers_them():
    lex = LexicalIndex()
    ids = [f"c{i}" for i in range(1500)]
    for cid in ids:
        lex.add(cid, f"alpha {cid}")
    key = lex.numbering
    docs = lex.numbers(["c7", "missing", "c1499"])
    assert docs.tolist()[1] == -1 and lex.cids_of(docs[[0, 2]]) == ["c7", "c1499"]
    lex.add("new", "beta")
    assert lex.numbering == key  # an add leaves the other numbers as they were
    assert lex.cids_of(lex.numbers(["c7"])) == ["c7"]
    old = lex.numbers(["c7"])
    lex.add("c7", "gamma")  # a re-add: a new number, the old one dead
    assert (~lex.liveness[old]).tolist() == [True] and lex.numbers(["c7"])[0] != old[0]
    assert (~lex.liveness[lex.numbers(["c8", "c7"])]).tolist() == [False, False]
    lex.remove("c3")
    assert lex.numbering == key  # numbers given so far keep their meaning
    key = lex.numbering
    for cid in ids[:1000]:
        lex.remove(cid)  # past half removed: compacted
    assert lex.numbering != key
    words = lex.query_terms("c1200 c1300 c1400 c1450")
    got, vals = lex.top_docs(*lex.scores(words), 3)
    assert set(lex.cids_of(got)) <= {"c1200", "c1300", "c1400", "c1450"}
    assert len(got) == 3 and (np.diff(vals) <= 0).all()
    np.testing.assert_array_equal(lex.scores_at(got, *lex.scores(words)), vals)


def test_liveness_and_generation_follow_every_change_of_the_cells():
    lex = LexicalIndex()
    ids = [f"c{i}" for i in range(3000)]  # past the liveness array's first capacity
    seen = {lex.generation}
    for cid in ids:
        lex.add(cid, f"alpha {cid}")
    assert lex.generation not in seen
    docs = lex.numbers(ids)
    assert lex.liveness[docs].all()
    before = lex.generation
    lex.remove("c5")
    assert lex.generation != before and (~lex.liveness[docs[[5]]]).tolist() == [True]
    before = lex.generation
    lex.remove("missing")  # nothing changed: the generation stands
    assert lex.generation == before
    for cid in ids[:2000]:
        lex.remove(cid)  # compacted: new numbers, all alive
    left = lex.numbers(ids[2000:])
    assert (left >= 0).all() and lex.liveness[left].all()
    arrays = lex.export_arrays()
    cids, vocab = arrays.pop("cids").tolist(), arrays.pop("terms").tolist()
    restored = LexicalIndex.from_arrays(arrays, cids, vocab)
    assert restored.generation != lex.generation
    assert restored.liveness[restored.numbers(ids[2000:])].all()


def test_the_pool_pass_gives_the_scores_a_search_would_look_up():
    lex = LexicalIndex()
    rng = np.random.default_rng(3)
    words = ["gene", "brca1", "protein", "cell", "berlin", "mouse"] + [f"w{i}" for i in range(20)]
    for i in range(200):
        lex.add(f"c{i}", " ".join(rng.choice(words, 4)))
    query = lex.query_terms("brca1 protein mouse")
    docs, vals = lex.scores(query)
    pool = lex.numbers(["c3", "missing", "c150", "c7"])
    top, top_vals, at_pool = bm25_pool(*lex.kernel_args(query), pool, 20)
    want_top, want_vals = lex.top_docs(docs, vals, 20)
    assert top.tolist() == want_top.tolist()
    np.testing.assert_array_equal(top_vals, want_vals)
    np.testing.assert_array_equal(at_pool, lex.scores_at(pool, docs, vals))
    assert lex.kernel_args(("zzz",)) is None  # no term scored: the pass is not run
    everywhere = LexicalIndex()
    for i in range(30):
        everywhere.add(f"c{i}", "common word")
    held_by_all = everywhere.query_terms("common")
    assert everywhere.kernel_args(held_by_all) is None  # held by too many: not scored
    assert everywhere.kernel_args(everywhere.query_terms("common word")) is None


def test_a_term_asked_for_again_after_each_write_scores_its_postings_as_they_are_now():
    """What a term's kernel arguments are (its postings' addresses, count and weight) is
    kept between queries only until the next write: postings that grow move in memory,
    and the weights follow the number of cells. Queried after every add and remove, and
    after a snapshot's index is first written to, the scores are the formula's."""
    rng = np.random.default_rng(4)
    built = LexicalIndex()
    texts: dict[str, list[str]] = {}
    query = ("w1", "w2", "w5")
    for i in range(400):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), 5)]
        built.add(f"d{i}", " ".join(words))
        texts[f"d{i}"] = words
        if i % 3 == 0 and i > 30:
            gone = f"d{i - 30}"
            built.remove(gone)
            del texts[gone]
        want = _reference(texts, query)
        ids, scores = built.top(query, len(texts))
        assert set(ids) == set(want)
        assert all(
            math.isclose(s, want[c], rel_tol=1e-5)
            for c, s in zip(ids, scores.tolist(), strict=True)
        )
    arrays = built.export_arrays()
    cids, terms = arrays.pop("cids").tolist(), arrays.pop("terms").tolist()
    opened = LexicalIndex.from_arrays(arrays, cids, terms)
    assert opened.top(query, 500)[0] == built.top(query, 500)[0]  # in the snapshot's arrays
    opened.add("new", "w1 w1 w2")
    built.add("new", "w1 w1 w2")
    assert opened.top(query, 500)[0] == built.top(query, 500)[0]  # in per-term postings
