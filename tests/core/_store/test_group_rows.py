"""The groups collection: the group cache and the journal rows share it and never mix."""

from __future__ import annotations

import chromadb
import numpy as np
import pytest

from magnetic_core._store.group_rows import JOURNAL_KEY, GroupRows


@pytest.fixture
def rows():
    client = chromadb.EphemeralClient()
    name = f"groups-{np.random.default_rng().integers(1 << 30)}"
    rows = GroupRows("ns")
    rows.groups = rows.log = client.get_or_create_collection(name, embedding_function=None)
    rows.batch = 3  # small batches: every write below spans several
    yield rows
    client.delete_collection(name)


def _unit(rng: np.random.Generator, n: int, dim: int = 4) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_the_group_cache_reads_back_what_was_written_across_batches(rows):
    rng = np.random.default_rng(0)
    gids = [f"g{i}" for i in range(8)]
    cents = _unit(rng, 8)
    rows.write_groups(gids, cents, list(range(1, 9)))
    cache = rows.group_cache()
    assert sorted(cache) == sorted(gids)
    for i, gid in enumerate(gids):
        size, vec = cache[gid]
        assert size == i + 1 and vec.dtype == np.float32
        np.testing.assert_allclose(vec, cents[i], atol=1e-6)


def test_rewriting_a_group_replaces_its_row_and_delete_removes_rows(rows):
    rng = np.random.default_rng(1)
    rows.write_groups(["a", "b", "c", "d"], _unit(rng, 4), [1, 2, 3, 4])
    new = _unit(rng, 1)
    rows.write_groups(["b"], new, [9])
    rows.delete_groups(["a", "c", "d", "missing"])
    cache = rows.group_cache()
    assert list(cache) == ["b"] and cache["b"][0] == 9
    np.testing.assert_allclose(cache["b"][1], new[0], atol=1e-6)


def test_journal_rows_are_not_groups_and_groups_are_not_journal_rows(rows):
    rng = np.random.default_rng(2)
    rows.write_groups(["g1", "g2"], _unit(rng, 2), [5, 6])
    metas = [{JOURNAL_KEY: "t1", "k": i} for i in range(5)]
    rows.log_write([f"j{i}" for i in range(5)], None, metas, dim=4)
    assert sorted(rows.group_cache()) == ["g1", "g2"]
    got = rows.log_read({JOURNAL_KEY: "t1"})
    assert sorted(got["ids"]) == [f"j{i}" for i in range(5)]
    assert sorted(m["k"] for m in got["metadatas"]) == list(range(5))
    rows.log_delete({JOURNAL_KEY: "t1"})
    assert rows.log_read({JOURNAL_KEY: "t1"})["ids"] == []
    assert sorted(rows.group_cache()) == ["g1", "g2"]


def test_full_journal_reads_bring_vectors_and_documents(rows):
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 4)
    ids = [f"j{i}" for i in range(4)]
    docs = [f"text {i}" for i in range(4)]
    rows.log_write(ids, vecs, [{JOURNAL_KEY: "t"}] * 4, docs, dim=4)
    got = rows.log_read({JOURNAL_KEY: "t"}, full=True)
    order = np.argsort(got["ids"])
    assert [got["documents"][i] for i in order] == docs
    np.testing.assert_allclose(np.asarray(got["embeddings"])[order], vecs, atol=1e-6)
    assert rows.log_read({JOURNAL_KEY: "t"}).get("documents") is None


def test_journal_rows_without_vectors_get_a_unit_filler(rows):
    rows.log_write(["j"], None, [{JOURNAL_KEY: "x"}], dim=4)
    vec = np.asarray(rows.log_read({JOURNAL_KEY: "x"}, full=True)["embeddings"][0])
    assert np.linalg.norm(vec) == pytest.approx(1.0)


def test_a_row_without_a_size_reads_as_size_minus_one(rows):
    # a group row written by something else (no size): the cache never trusts it as a size
    rows.groups.upsert(ids=["odd"], embeddings=[[0.0, 1.0, 0.0, 0.0]], metadatas=[{"x": 1}])
    assert rows.group_cache()["odd"][0] == -1
