"""MagneticMemory end to end on a real embedded Chroma store (hashing embedder)."""

from __future__ import annotations

import asyncio
import threading

import chromadb
import numpy as np
import pytest

from magnetic_core import (
    DimensionError,
    DuplicateIdError,
    EmbedderMismatchError,
    EmbeddingError,
    EmptyTextError,
    FilterError,
    HashingEmbedder,
    InvalidVectorError,
    MagneticMemory,
    MemoryConfig,
    MetadataError,
)
from magnetic_core.errors import ClosedError, InvalidInputError
from magnetic_core.eval import clustered_data
from tests import invariants

TEXTS = [
    "the cat sat on the mat",
    "a kitten chased the cat",
    "stock markets fell sharply today",
    "investors sold shares as markets fell",
    "the deploy script is /opt/app/deploy.sh",
]


@pytest.fixture
def mem(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path / "store"), embedder=hashing) as memory:
        yield memory


class FlakyEmbedder:
    """Wraps an embedder; fails or returns NaN on demand."""

    def __init__(self, inner, mode=None):
        self.inner, self.mode = inner, mode
        self.name, self.dim = inner.name, inner.dim

    def embed_documents(self, texts):
        if self.mode == "raise":
            raise ConnectionError("model server went away")
        vecs = np.asarray(self.inner.embed_documents(texts))
        if self.mode == "nan":
            vecs[-1, 0] = np.nan
        if self.mode == "zero":
            vecs[-1] = 0
        return vecs

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_add_search_get_count(mem):
    ids = mem.add(TEXTS, metadatas=[{"i": i} for i in range(5)], ids=[f"t{i}" for i in range(5)])
    assert ids == [f"t{i}" for i in range(5)]
    assert mem.count() == 5
    hits = mem.search("the cat sat on the mat", k=2)
    assert hits[0].id == "t0"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].metadata == {"i": 0}
    assert hits[0].group_id == mem.get(["t0"])[0].group_id
    assert hits[0].group_label
    assert [c.id for c in mem.get(["t3", "missing", "t1"])] == ["t3", "t1"]


def test_generated_ids_are_unique(mem):
    ids = mem.add(["one", "two"])
    assert len(set(ids)) == 2 and all(ids)


def test_k_results_whenever_k_cells_exist(tmp_path):
    vecs, _ = clustered_data(300, 32, 30, spread=0.2, seed=4)
    with MagneticMemory(
        path=str(tmp_path), embedder=HashingEmbedder(32), config=MemoryConfig(n_probe=1)
    ) as mem:
        mem.add([f"doc {i}" for i in range(300)], vectors=vecs, ids=[str(i) for i in range(300)])
        assert mem.stats().groups > 1
        hits = mem.search(vector=vecs[0], k=250, explain=True, n_probe=1)
        assert len(hits) == 250
        assert any(h.route.fallback_ran for h in hits)
        scores = [h.rank_score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert len(mem.search(vector=vecs[0], k=1000)) == 300


def test_search_with_filter_returns_k_matching(mem):
    mem.add(
        [f"note number {i}" for i in range(60)],
        metadatas=[{"parity": "even" if i % 2 == 0 else "odd", "i": i} for i in range(60)],
    )
    hits = mem.search("note number 3", k=10, filter={"parity": "odd"})
    assert len(hits) == 10
    assert all(h.metadata["parity"] == "odd" for h in hits)
    hits = mem.search("note", k=5, filter={"$and": [{"i": {"$gte": 50}}, {"i": {"$lt": 53}}]})
    assert sorted(h.metadata["i"] for h in hits) == [50, 51, 52]
    with pytest.raises(FilterError, match=r"\$regex"):
        mem.search("note", filter={"i": {"$regex": "x"}})


def test_explain_reports_the_route(mem):
    mem.add(TEXTS)
    hit = mem.search("where is /opt/app/deploy.sh", k=1, explain=True)[0]
    assert "deploy.sh" in hit.text
    assert "entity" in hit.route.stages
    assert hit.route.boost == pytest.approx(0.1)
    assert hit.rank_score == pytest.approx(hit.score + 0.1 + hit.route.lexical)
    assert hit.route.lexical > 0  # the query shares words with the cell
    assert -1 <= hit.route.centroid_similarity <= 1
    assert mem.search("cat", k=1)[0].route is None


def test_entity_boost_lifts_the_cell_that_names_it(tmp_path):
    emb = HashingEmbedder(64)
    texts = [f"report about quarterly numbers {i}" for i in range(30)] + [
        "the numbers are in budget_2024.xlsx"
    ]
    with MagneticMemory(path=str(tmp_path), embedder=emb) as mem:
        mem.add(texts, ids=[str(i) for i in range(31)])
        plain = mem.search("quarterly numbers budget_2024.xlsx", k=3, entity_boost=0.0)
        boosted = mem.search("quarterly numbers budget_2024.xlsx", k=3)
        assert boosted[0].id == "30"
        assert [h.id for h in plain][0] != "30" or plain[0].score > plain[1].score


def test_upsert_updates_text_metadata_and_group(tmp_path):
    vecs = np.eye(8, dtype=np.float32)[:2]
    with MagneticMemory(
        path=str(tmp_path), embedder=HashingEmbedder(8), config=MemoryConfig(join_threshold=0.9)
    ) as mem:
        mem.add(["a", "b"], ids=["a", "b"], vectors=vecs)
        ga, gb = mem.get(["a"])[0].group_id, mem.get(["b"])[0].group_id
        assert ga != gb
        created = mem.get(["a"])[0].created_at
        mem.add(["a moved"], ids=["a"], metadatas=[{"v": 2}], vectors=vecs[1:2])
        moved = mem.get(["a"])[0]
        assert mem.count() == 2
        assert moved.text == "a moved" and moved.metadata == {"v": 2}
        assert moved.group_id == gb
        assert moved.created_at == created and moved.updated_at >= created
        assert ga not in {g.id for g in mem.groups()}  # the emptied group is gone
        assert mem.group(gb).size == 2


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"texts": ["ok", "  "]}, EmptyTextError, "text 1 is empty"),
        ({"texts": ["a", "b"], "ids": ["x", "x"]}, DuplicateIdError, "'x' appears twice"),
        ({"texts": ["a"], "vectors": [[1.0, 0.0]]}, DimensionError, "dimension 2"),
        ({"texts": ["a"], "vectors": [[np.nan] * 128]}, InvalidVectorError, "NaN"),
        ({"texts": ["a"], "vectors": [[0.0] * 128]}, InvalidVectorError, "all zeros"),
        ({"texts": ["a"], "metadatas": [{"k": {1, 2}}]}, MetadataError, "cannot be stored"),
        ({"texts": ["a"], "metadatas": [{"_mag_x": 1}]}, MetadataError, "reserved"),
        ({"texts": ["a", "b"], "metadatas": [{}]}, InvalidInputError, "1 metadatas for 2"),
        ({"texts": "just one string"}, InvalidInputError, "one string"),
        ({"texts": ["a"], "ids": [""]}, InvalidInputError, "non-empty string"),
    ],
)
def test_bad_input_is_refused_and_nothing_changes(mem, kwargs, error, fragment):
    mem.add(["keep me"], ids=["keep"], metadatas=[{"v": 1}])
    before = invariants.State.of(mem)
    with pytest.raises(error, match=fragment):
        mem.add(**kwargs)
    invariants.same_state(before, invariants.State.of(mem))


@pytest.mark.parametrize("mode", ["raise", "nan", "zero"])
def test_embedding_failures_raise_and_store_nothing(tmp_path, hashing, mode):
    with MagneticMemory(path=str(tmp_path), embedder=FlakyEmbedder(hashing, mode)) as mem:
        with pytest.raises(EmbeddingError):
            mem.add(["first", "second"])
        assert mem.count() == 0
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.count() == 0


def test_delete_by_ids_and_filter(mem):
    mem.add(TEXTS, ids=[f"t{i}" for i in range(5)], metadatas=[{"i": i} for i in range(5)])
    assert mem.delete(ids=["t0", "nope"]) == 1
    assert mem.delete(filter={"i": {"$gte": 3}}) == 2
    assert sorted(c.id for c in mem.get()) == ["t1", "t2"]
    assert mem.delete(ids=["t1", "t2"], filter={"i": 1}) == 1
    with pytest.raises(InvalidInputError, match="clear"):
        mem.delete()
    assert all(h.id != "t0" for h in mem.search("the cat sat on the mat", k=5))


def test_clear_keeps_the_stamp(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(TEXTS)
        mem.clear()
        assert mem.count() == 0 and mem.groups() == []
        mem.add(["again"])
        assert mem.count() == 1
    with pytest.raises(EmbedderMismatchError):
        MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(64))


def test_embedder_mismatch_is_refused_with_a_hint(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["x"])
    with pytest.raises(EmbedderMismatchError, match="hashing-128") as info:
        MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(64))
    assert "same embedder" in str(info.value)


def test_namespaces_are_isolated(tmp_path, hashing):
    client = chromadb.PersistentClient(path=str(tmp_path))
    try:
        a = MagneticMemory(namespace="alice", embedder=hashing, client=client)
        b = MagneticMemory(namespace="bob", embedder=HashingEmbedder(32), client=client)
        a.add(["alice's secret"], ids=["s"])
        b.add(["bob's note"], ids=["s"])
        assert a.get(["s"])[0].text == "alice's secret"
        assert b.get(["s"])[0].text == "bob's note"
        assert a.count() == b.count() == 1
        names = {c.name for c in client.list_collections()}
        assert names == {"mag-alice-cells", "mag-alice-groups", "mag-bob-cells", "mag-bob-groups"}
        with pytest.raises(InvalidInputError, match="namespace"):
            MagneticMemory(namespace="no spaces!", embedder=hashing, client=client)
    finally:
        client.close()


def test_no_collection_per_group(tmp_path, hashing):
    client = chromadb.PersistentClient(path=str(tmp_path))
    try:
        mem = MagneticMemory(embedder=hashing, client=client)
        mem.add([f"distinct topic number {i} zebra{i}" for i in range(100)])
        assert mem.stats().groups > 2
        assert len(client.list_collections()) == 2
        truth = {g.id: g.size for g in mem.groups()}
        mem.close()  # the group cache is brought up to date at close (rarely before)
        groups = client.get_collection("mag-default-groups").get(include=["metadatas"])
        sizes = {gid: m["size"] for gid, m in zip(groups["ids"], groups["metadatas"])}
        assert sizes == truth
    finally:
        client.close()


def test_ephemeral_client(hashing):
    client = chromadb.EphemeralClient()
    mem = MagneticMemory(namespace="ephemeral-test", embedder=hashing, client=client)
    mem.add(TEXTS)
    assert mem.search("kitten", k=1)[0].text == "a kitten chased the cat"
    mem.clear()
    mem.close()


def test_groups_stats_and_merges(tmp_path):
    vecs, labels = clustered_data(400, 32, 4, spread=0.3, seed=8)
    config = MemoryConfig(join_threshold=0.97, max_group_size=1000)
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32), config=config) as mem:
        mem.add([f"item {i}" for i in range(400)], vectors=vecs, ids=[str(i) for i in range(400)])
        before = mem.stats()
        assert before.count == 400 and before.threshold_source == "configured"
        assert before.groups > 4
        plan = mem.plan_merges(0.9)
        assert len(plan) > 0
        for keep, absorb, sim in plan.pairs:
            assert sim >= 0.9 and keep != absorb
        kept = mem.apply_merges(plan)
        after = mem.stats()
        assert after.groups == before.groups - len(kept)
        assert after.count == 400
        # merging never mixes the generating clusters
        for info in mem.groups():
            assert len({int(labels[int(c)]) for c in info.cell_ids}) == 1
    with MagneticMemory(path=str(tmp_path), embedder=HashingEmbedder(32), config=config) as mem:
        assert mem.stats().groups == after.groups


def test_contradictions_are_linked_both_ways_and_persist(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(["the meeting is on monday", "the meeting is on friday"], ids=["a", "b"])
        mem.mark_contradiction("a", "b", "different days")
        with pytest.raises(InvalidInputError):
            mem.mark_contradiction("a", "zzz", "nope")
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        a, b = mem.get(["a", "b"])
        assert a.contradictions[0]["other"] == "b"
        assert b.contradictions[0]["explanation"] == "different days"
        assert mem.count() == 2


def test_calibration_regroups_at_checkpoints_and_persists(tmp_path):
    vecs, _ = clustered_data(300, 32, 10, spread=0.4, seed=6)
    emb = HashingEmbedder(32)
    with MagneticMemory(path=str(tmp_path), embedder=emb) as mem:
        mem.add([f"x{i}" for i in range(20)], vectors=vecs[:20])
        assert mem.stats().threshold_source == "provisional"
        mem.add([f"x{i}" for i in range(20, 300)], vectors=vecs[20:])
        stats = mem.stats()
        assert stats.threshold_source == "calibrated"
        live = invariants.State.of(mem)
    with MagneticMemory(path=str(tmp_path), embedder=emb) as mem:
        assert mem.join_threshold == pytest.approx(stats.join_threshold)
        invariants.same_state(live, invariants.State.of(mem))


def test_batch_add_equals_one_by_one_through_calibration(tmp_path):
    vecs, _ = clustered_data(300, 16, 8, spread=0.5, seed=11)
    emb = HashingEmbedder(16)
    ids = [str(i) for i in range(300)]
    with MagneticMemory(path=str(tmp_path / "a"), embedder=emb) as a:
        a.add(ids, vectors=vecs, ids=ids)
        part_a = {frozenset(g.cell_ids) for g in a.groups()}
    with MagneticMemory(path=str(tmp_path / "b"), embedder=emb) as b:
        for i in ids:
            b.add([i], vectors=vecs[int(i)][None, :], ids=[i])
        part_b = {frozenset(g.cell_ids) for g in b.groups()}
    assert part_a == part_b


def test_concurrent_readers_and_writers(tmp_path, hashing):
    errors: list[BaseException] = []
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add([f"seed memory {i}" for i in range(50)])

        def writer(n):
            try:
                for j in range(10):
                    mem.add([f"writer {n} memory {j}"], ids=[f"w{n}-{j}"])
            except BaseException as e:
                errors.append(e)

        def reader():
            try:
                for _ in range(30):
                    assert len(mem.search("memory", k=5)) == 5
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
        threads += [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert mem.count() == 80
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        assert mem.count() == 80


async def test_async_twins(mem):
    ids = await mem.aadd(TEXTS)
    assert await mem.acount() == 5
    hits, cells = await asyncio.gather(mem.asearch("kitten", k=1), mem.aget(ids[:2]))
    assert hits[0].text == "a kitten chased the cat"
    assert [c.id for c in cells] == ids[:2]
    assert await mem.adelete(ids=ids[:1]) == 1
    await mem.aclear()
    assert mem.count() == 0


def test_closed_memory_refuses_work(tmp_path, hashing):
    mem = MagneticMemory(path=str(tmp_path), embedder=hashing)
    mem.close()
    mem.close()
    with pytest.raises(ClosedError):
        mem.add(["x"])
    with pytest.raises(ClosedError):
        mem.search("x")


def test_delete_with_an_empty_id_list_deletes_nothing(mem):
    mem.add(TEXTS, metadatas=[{"i": i} for i in range(5)])
    assert mem.delete(ids=[]) == 0
    assert mem.delete(ids=[], filter={"i": 1}) == 0
    assert mem.count() == 5


def test_cells_read_back_identical_after_reopening(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add(TEXTS, metadatas=[{"i": i, "t": (i, "x")} for i in range(5)])
        mem.mark_contradiction(mem.get()[0].id, mem.get()[1].id, "test link")
        before = invariants.State.of(mem)
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        # text, metadata, group, entities, timestamps, links; groups, vectors, threshold
        invariants.same_state(before, invariants.State.of(mem))


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_bad_search_arguments_are_refused(mem, bad):
    mem.add(TEXTS)
    with pytest.raises(InvalidInputError, match="n_probe"):
        mem.search("cat", n_probe=bad)
    with pytest.raises(InvalidInputError, match="k must be"):
        mem.search("cat", k=-1)
