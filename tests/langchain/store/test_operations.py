"""MagneticStore against LangGraph's InMemoryStore: the SQLite/Postgres store tests, ported.

Every call runs on both stores through :class:`Twin`, which asserts equal results (items,
values, namespaces; scores to 4 decimals for ranked searches). Behaviour the reference
lacks (TTL, persistence, isolation) is tested on its own.
"""

from __future__ import annotations

import pytest
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from tests.langchain.store.helpers import Twin


# -- batches -----------------------------------------------------------------------------
def test_batch_results_follow_op_order_and_reads_precede_puts(twin: Twin) -> None:
    twin.put(("test", "foo"), "key1", {"data": "value1"})
    twin.put(("test", "bar"), "key2", {"data": "value2"})
    results = twin.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "changed"}),
            SearchOp(("test",), {"data": "value1"}, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
            GetOp(("test", "bar"), "key2"),
            GetOp(("test",), "missing"),
        ]
    )
    assert results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4].value == {"data": "value2"}  # the put lands after the batch's reads
    assert results[5] is None
    assert twin.get(("test", "bar"), "key2").value == {"data": "changed"}


def test_batch_puts_last_wins_and_none_deletes(twin: Twin) -> None:
    twin.put(("test",), "gone", {"x": 1})
    twin.batch(
        [
            PutOp(("test",), "k", {"v": 1}),
            PutOp(("test",), "k", {"v": 2}),
            PutOp(("test",), "gone", None),
        ]
    )
    assert twin.get(("test",), "k").value == {"v": 2}
    assert twin.get(("test",), "gone") is None


def test_batch_search_and_list_ops(twin: Twin) -> None:
    for ns, key, tag in [
        (("t", "foo"), "k1", "a"),
        (("t", "bar"), "k2", "a"),
        (("t", "baz"), "k3", "b"),
    ]:
        twin.put(ns, key, {"tag": tag})
    found = twin.batch(
        [
            SearchOp(("t",), {"tag": "a"}, 10, 0),
            SearchOp(("t",), None, 3, 0),
            SearchOp(("t", "foo"), None, 10, 0),
            ListNamespacesOp((MatchCondition("suffix", ("foo",)),), None, 10, 0),
            ListNamespacesOp(None, 1, 10, 0),
        ]
    )
    assert sorted(i.key for i in found[0]) == ["k1", "k2"]
    assert len(found[1]) == 3
    assert [i.namespace for i in found[2]] == [("t", "foo")]
    assert found[3] == [("t", "foo")]
    assert found[4] == [("t",)]


async def test_abatch_matches_batch(twin: Twin) -> None:
    await twin.acall("aput", ("a", "b"), "k", {"n": 1})
    await twin.acall("aput", ("a", "c"), "k", {"n": 2})
    assert (await twin.acall("aget", ("a", "c"), "k")).value == {"n": 2}
    assert len(await twin.acall("asearch", ("a",), filter={"n": {"$gte": 1}})) == 2
    assert await twin.acall("alist_namespaces", prefix=("a",)) == [("a", "b"), ("a", "c")]
    await twin.acall("adelete", ("a", "b"), "k")
    assert await twin.acall("aget", ("a", "b"), "k") is None


# -- basic operations and namespaces -------------------------------------------------------
def test_put_get_update_delete(twin: Twin) -> None:
    ns = ("test", "documents")
    twin.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    first = twin.get(ns, "doc1")
    assert isinstance(first, Item) and first.namespace == ns
    twin.put(ns, "doc1", {"title": "Updated", "content": "Hello, Again!"})
    again = twin.get(ns, "doc1")
    assert again.value["title"] == "Updated"
    assert again.created_at == first.created_at  # an update keeps the creation time
    assert again.updated_at > first.updated_at
    twin.delete(ns, "doc1")
    assert twin.get(ns, "doc1") is None
    twin.delete(ns, "never-there")
    assert twin.get(("other",), "doc1") is None


def test_list_namespaces_prefix_suffix_wildcards_depth_paging(twin: Twin) -> None:
    for ns in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]:
        twin.put(ns, "k", {"v": 1})
    twin.list_namespaces(limit=100)
    twin.list_namespaces(prefix=("a", "b"))
    twin.list_namespaces(suffix=("f",))
    twin.list_namespaces(prefix=("a",), suffix=("f",))
    twin.list_namespaces(prefix=("a", "*", "f"))
    twin.list_namespaces(suffix=("*", "f"))
    twin.list_namespaces(prefix=("a", "b"), max_depth=3)
    twin.list_namespaces(max_depth=2, limit=3, offset=2)
    assert twin.list_namespaces(prefix=("nope",)) == []
    assert twin.list_namespaces(prefix=("users",)) == [
        ("users", "123"),
        ("users", "456", "settings"),
    ]


def test_namespace_boundaries_are_exact(twin: Twin) -> None:
    twin.put(("users", "alice"), "k", {"v": 1})
    twin.put(("users", "alice\n"), "k", {"v": 2})
    twin.put(("users", "alicex"), "k", {"v": 3})
    twin.put(("Users", "alice"), "k", {"v": 4})
    hits = twin.search(("users", "alice"))
    assert [i.value["v"] for i in hits] == [1]
    assert twin.list_namespaces(suffix=("alice",), limit=100) == [
        ("Users", "alice"),
        ("users", "alice"),
    ]
    assert len(twin.search(())) == 4  # the empty prefix is unconstrained


def test_search_filters_exact_nested_and_operators(twin: Twin) -> None:
    docs = {
        "a": {
            "color": "red",
            "score": 4.5,
            "meta": {"lang": "en", "n": 1},
            "tags": ["x", "y"],
            "ok": True,
        },
        "b": {
            "color": "red",
            "score": 3.0,
            "meta": {"lang": "fr", "n": 2},
            "tags": ["x"],
            "ok": False,
        },
        "c": {"color": "green", "score": 4.0, "meta": {"lang": "en", "n": 3}, "ok": 1},
        "d": {"color": "blue", "score": 3.5, "text": "it's; DROP TABLE"},
    }
    for key, value in docs.items():
        twin.put(("f",), key, value)
    for flt in [
        {"color": "red"},
        {"color": {"$eq": "red"}},
        {"color": {"$ne": "red"}},
        {"score": {"$gt": 3.2}},
        {"score": {"$gte": 4.0}, "color": "green"},
        {"score": {"$lt": 4}},
        {"score": {"$lte": 3.5, "$gt": 3.0}},
        {"meta": {"lang": "en"}},
        {"meta": {"n": {"$gte": 2}}},
        {"tags": ["x", "y"]},
        {"text": "it's; DROP TABLE"},
        {"color": "purple"},
    ]:
        twin.search(("f",), filter=flt)
    ours = twin.store.search(("f",), filter={"meta.lang": "en"})  # dotted keys, our extension
    assert sorted(i.key for i in ours) == ["a", "c"]
    # JSON has no 1 == true (InMemoryStore's Python comparison has): as the SQL stores.
    assert [i.key for i in twin.store.search(("f",), filter={"ok": 1})] == ["c"]
    assert [i.key for i in twin.store.search(("f",), filter={"ok": True})] == ["a"]


def test_search_paging_without_query_is_newest_first(twin: Twin) -> None:
    for i in range(7):
        twin.put(("p",), f"k{i}", {"i": i})
    # InMemoryStore pages in insertion order; the SQL stores and MagneticStore newest first.
    pages = [twin.store.search(("p",), limit=3, offset=o) for o in (0, 3, 6)]
    keys = [i.key for page in pages for i in page]
    assert keys == [f"k{i}" for i in reversed(range(7))]


def test_bad_filters_and_puts_are_refused_clearly(twin: Twin) -> None:
    from magnetic_core.errors import FilterError, InvalidInputError

    twin.store.put(("e",), "k", {"v": 1})
    with pytest.raises(FilterError, match=r"\$regex"):
        twin.store.search(("e",), filter={"v": {"$regex": "x"}})
    with pytest.raises(FilterError, match="number"):
        twin.store.search(("e",), filter={"v": {"$gt": "many"}})
    with pytest.raises(InvalidInputError, match="dict"):
        twin.store.put(("e",), "k2", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="period"):
        twin.store.put(("e.x",), "k", {"v": 1})
    assert [i.key for i in twin.store.search(("e",))] == ["k"]
