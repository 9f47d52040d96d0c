"""A hypothesis state machine: MagneticMemory against a plain brute-force reference model.

Named invariants (the checks themselves are in ``tests/invariants.py``), checked after every
step:
- ``count``: the store holds as many cells as the model.
- ``ids``: the same ids, each once.
- ``metadata_round_trip``: every cell's text, metadata and vector equal what was last added.
- ``hierarchy``: every cell in exactly one group, group sizes their member counts within the
  cap, centroids the normalised means of their members, every vector of unit length.
- ``reopened_equals_live`` (in the reopen rule): cells, groups, vectors and the join threshold
  are the same after a close and an open.
- ``exact_when_all_groups_probed`` (in the search rule): with every group probed and no
  boost, results equal exact brute-force search, filters included.
- ``recall_at_default_settings``: recall@10 >= 0.95 against brute force with the default
  search settings (the larger-scale version is in ``test_recall.py``).
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from magnetic_core import HashingEmbedder, MagneticMemory, MemoryConfig
from tests import invariants

DIM = 8
CENTRES = np.random.default_rng(0).standard_normal((5, DIM))

ids_strategy = st.sampled_from([f"id{i}" for i in range(40)])
metadata_strategy = st.fixed_dictionaries(
    {"bucket": st.integers(0, 3)},
    optional={
        "label": st.text(max_size=5),
        "tags": st.lists(st.integers(-5, 5), max_size=3),
        "pair": st.tuples(st.booleans(), st.floats(allow_nan=False, allow_infinity=False)),
        "none": st.none(),
    },
)


def make_vector(cluster: int, seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal(DIM) * 0.3
    vec = CENTRES[cluster] + noise
    return (vec / np.linalg.norm(vec)).astype(np.float32)


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = tempfile.mkdtemp(prefix="magnetic-sm-")
        self.embedder = HashingEmbedder(DIM)
        # small cap and calibration size so splits and recalibration happen in short runs
        self.config = MemoryConfig(max_group_size=6, calibration_size=32, chunk_size=4)
        self.mem = MagneticMemory(path=self.path, embedder=self.embedder, config=self.config)
        self.model: dict[str, tuple[str, dict, np.ndarray]] = {}

    @initialize()
    def start_empty(self) -> None:
        assert self.mem.count() == 0

    @rule(
        items=st.lists(
            st.tuples(ids_strategy, st.integers(0, 4), st.integers(0, 2**16), metadata_strategy),
            min_size=1,
            max_size=12,
            unique_by=lambda t: t[0],
        )
    )
    def add(self, items) -> None:
        ids = [i for i, _, _, _ in items]
        vecs = np.stack([make_vector(c, s) for _, c, s, _ in items])
        texts = [f"text of {i} seed {s}" for i, _, s, _ in items]
        metas = [m for _, _, _, m in items]
        assert self.mem.add(texts, metadatas=metas, ids=ids, vectors=vecs) == ids
        for cid, text, meta, vec in zip(ids, texts, metas, vecs):
            self.model[cid] = (text, meta, vec)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete_some(self, data) -> None:
        victims = data.draw(st.lists(st.sampled_from(sorted(self.model)), max_size=4))
        victims = list(dict.fromkeys(victims + ["never-added"]))
        assert self.mem.delete(ids=victims) == len([v for v in victims if v in self.model])
        for v in victims:
            self.model.pop(v, None)

    @rule(bucket=st.integers(0, 3))
    def delete_by_filter(self, bucket) -> None:
        expected = [c for c, (_, m, _) in self.model.items() if m["bucket"] == bucket]
        assert self.mem.delete(filter={"bucket": bucket}) == len(expected)
        for c in expected:
            del self.model[c]

    @rule(
        cluster=st.integers(0, 4),
        seed=st.integers(0, 2**16),
        k=st.integers(1, 15),
        bucket=st.none() | st.integers(0, 3),
    )
    def search_matches_exact(self, cluster, seed, k, bucket) -> None:
        q = make_vector(cluster, seed)
        where = None if bucket is None else {"bucket": {"$ne": bucket}}
        hits = self.mem.search(vector=q, k=k, filter=where, n_probe=10**6, entity_boost=0.0)
        pool = [
            (float(vec @ q), cid)
            for cid, (_, meta, vec) in self.model.items()
            if bucket is None or meta["bucket"] != bucket
        ]
        pool.sort(reverse=True)
        expected = pool[:k]
        assert len(hits) == len(expected)
        assert np.allclose([h.score for h in hits], [s for s, _ in expected], atol=1e-5)
        for hit in hits:  # ties may come back in either order, but each score is exact
            assert abs(float(self.model[hit.id][2] @ q) - hit.score) < 1e-5

    @rule()
    def reopen(self) -> None:
        live = invariants.State.of(self.mem)
        self.mem.close()
        self.mem = MagneticMemory(path=self.path, embedder=self.embedder, config=self.config)
        invariants.same_state(live, invariants.State.of(self.mem))

    @invariant()
    def count(self) -> None:
        invariants.count(self.mem, len(self.model))

    @invariant()
    def ids(self) -> None:
        invariants.ids(self.mem, self.model)

    @invariant()
    def metadata_round_trip(self) -> None:
        invariants.records(self.mem, {c: (t, m) for c, (t, m, _) in self.model.items()})
        invariants.vectors(self.mem, {c: v for c, (_, _, v) in self.model.items()})

    @invariant()
    def recall_at_default_settings(self) -> None:
        if not self.model:
            return
        ids = list(self.model)
        vecs = np.stack([self.model[c][2] for c in ids])
        total = 0.0
        for cluster in range(len(CENTRES)):
            q = make_vector(cluster, 7)
            k = min(10, len(ids))
            kth = np.sort(vecs @ q)[::-1][k - 1]
            hits = self.mem.search(vector=q, k=k)
            # tie-aware: equal vectors under different ids are equally right answers
            total += sum(1 for h in hits if h.score >= kth - 1e-5) / k
        assert total / len(CENTRES) >= 0.95

    @invariant()
    def hierarchy(self) -> None:
        assigned = invariants.hierarchy(self.mem, cap=self.config.max_group_size)
        assert set(assigned) == set(self.model)

    def teardown(self) -> None:
        self.mem.close()
        shutil.rmtree(self.path, ignore_errors=True)


MemoryMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMemoryMachine = MemoryMachine.TestCase
