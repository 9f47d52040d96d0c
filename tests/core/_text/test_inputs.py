"""Inputs that broke the README's promises (issue 10, item 7): each is refused clearly or
handled safely, and nothing already stored changes."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core import MagneticMemory
from magnetic_core._index.calibration import Calibration
from magnetic_core.config import MemoryConfig
from magnetic_core.errors import FilterError, InvalidInputError, MetadataError
from magnetic_core.validators import MAX_DEPTH


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def mem(path, hashing):
    with MagneticMemory(path=path, embedder=hashing) as memory:
        yield memory


@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e300, 1e-300, 3e38])
@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow warning leaks
def test_extreme_vectors_are_stored_as_unit_vectors(mem, path, hashing, scale):
    dim = hashing.dim
    vec = np.full(dim, scale)
    vec[::2] *= -1
    mem.add(["extreme"], ids=["x"], vectors=[vec])
    mem.add(["plain"], ids=["p"], vectors=[np.ones(dim)])
    stored = mem.get_vectors(["x"])[0]
    assert np.isfinite(stored).all()
    assert np.linalg.norm(stored) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(stored, np.sign(vec) / np.sqrt(dim), atol=1e-6)
    hits = mem.search(vector=vec * 0.5, k=2)
    assert [h.id for h in hits][0] == "x"
    assert all(np.isfinite(h.score) for h in hits)
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow warning leaks
def test_a_huge_query_vector_gives_finite_scores(mem, hashing):
    mem.add(["one", "two"], ids=["a", "b"])
    hits = mem.search(vector=np.full(hashing.dim, 1e300), k=2)
    assert len(hits) == 2 and all(np.isfinite(h.score) for h in hits)


def test_a_bare_string_of_ids_is_refused_like_get_and_delete(mem):
    with pytest.raises(InvalidInputError, match="ids must be a list"):
        mem.add(["one", "two", "three"], ids="abc")
    assert mem.count() == 0
    with pytest.raises(InvalidInputError, match="metadatas must be a list"):
        mem.add(["one"], metadatas={"k": 1})
    with pytest.raises(InvalidInputError, match="ids must be a list"):
        mem.get("abc")
    with pytest.raises(InvalidInputError, match="ids must be a list"):
        mem.delete("abc")


def test_a_rejected_add_at_the_first_checkpoint_keeps_the_threshold(path, hashing):
    texts = [f"note number {i} about topic {i % 5}" for i in range(31)]
    with MagneticMemory(path=path, embedder=hashing) as mem:
        mem.add(texts)
        before = (mem.join_threshold, mem.stats().threshold_source)
        groups = sorted(g.id for g in mem.groups())
        with pytest.raises(InvalidInputError):
            mem.add(["the 32nd cell \udc80"])  # a lone surrogate: Chroma cannot store it
        assert (mem.join_threshold, mem.stats().threshold_source) == before
        assert sorted(g.id for g in mem.groups()) == groups and mem.count() == 31
    with MagneticMemory(path=path, embedder=hashing) as mem:
        assert (mem.join_threshold, mem.stats().threshold_source) == before
        mem.add(["the 32nd cell, valid"])
        assert mem.stats().threshold_source == "calibrated"


def test_a_calibration_is_saved_only_when_committed(path, hashing):
    config = MemoryConfig()
    calibration = Calibration(config, {})
    with MagneticMemory(path=path, embedder=hashing) as mem:
        index = mem._index
        vecs = np.random.default_rng(0).normal(size=(40, hashing.dim))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        saved: list[dict] = []
        calibration.assign(index, [f"c{i}" for i in range(40)], vecs.astype(np.float32))
        assert calibration.source == "calibrated" and not saved
        calibration.commit(lambda **s: saved.append(s))
        calibration.commit(lambda **s: saved.append(s))
    assert len(saved) == 1
    assert saved[0] == {"mag_threshold": calibration.threshold, "mag_calibrated_n": 32}


def test_upserting_a_cell_keeps_its_contradiction_links(path, hashing):
    with MagneticMemory(path=path, embedder=hashing) as mem:
        mem.add(["the meeting is on monday", "the meeting is on friday"], ids=["a", "b"])
        mem.mark_contradiction("a", "b", "different days")
        mem.add(["the meeting is on monday at 10"], ids=["a"])
        a, b = mem.get(["a", "b"])
        assert [x["other"] for x in a.contradictions] == ["b"]
        assert [x["other"] for x in b.contradictions] == ["a"]
    with MagneticMemory(path=path, embedder=hashing) as mem:
        a, b = mem.get(["a", "b"])
        assert a.contradictions and b.contradictions


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"texts": ["bad \ud800 text"]}, "text 0"),
        ({"texts": ["fine", "bad \udfff"]}, "text 1"),
        ({"texts": ["fine"], "ids": ["id-\ud800"]}, "id 0"),
        ({"texts": ["fine"], "metadatas": [{"k": "v\ud800"}]}, "metadata 0"),
        ({"texts": ["fine"], "metadatas": [{"k\ud800": "v"}]}, "a key of metadata 0"),
        ({"texts": ["fine"], "metadatas": [{"k": {"n": ["x", "\ud800"]}}]}, "metadata 0"),
    ],
)
def test_lone_surrogates_are_input_errors_naming_the_field(mem, kwargs, field):
    with pytest.raises(InvalidInputError, match=f"{field} holds the lone surrogate") as err:
        mem.add(**kwargs)
    assert "Chroma" not in str(err.value)
    if "metadatas" in kwargs:
        assert isinstance(err.value, MetadataError)
    assert mem.count() == 0


@pytest.mark.parametrize("namespace", ["default\n", "default\r\n", "a\nb", "\ud800x"])
def test_a_namespace_with_control_characters_is_an_input_error(tmp_path, hashing, namespace):
    with pytest.raises(InvalidInputError, match="invalid namespace"):
        MagneticMemory(path=str(tmp_path), namespace=namespace, embedder=hashing)


def _nested_filter(levels: int) -> dict:
    where: dict = {"topic": "ai"}
    for _ in range(levels):
        where = {"$and": [where, {"year": {"$gte": 2000}}]}
    return where


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1000, 50_000])
def test_deeply_nested_filters_are_refused_everywhere(mem, levels):
    mem.add(["kept"], ids=["k"], metadatas=[{"topic": "ai", "year": 2024}])
    where = _nested_filter(levels)
    for call in (
        lambda: mem.search("kept", filter=where),
        lambda: mem.get(filter=where),
        lambda: mem.delete(filter=where),
    ):
        with pytest.raises(FilterError, match=f"more than {MAX_DEPTH} levels"):
            call()
    assert mem.count() == 1


def test_a_filter_at_the_depth_limit_works(mem):
    mem.add(["kept"], ids=["k"], metadatas=[{"topic": "ai", "year": 2024}])
    where = _nested_filter(MAX_DEPTH)
    assert [h.id for h in mem.search("kept", filter=where)] == ["k"]
    assert mem.delete(filter=where) == 1
