"""MagneticStore beyond the reference: TTL, persistence, isolation in storage, exports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import chromadb
import pytest

from magnetic_core.errors import ClosedError, InvalidInputError
from magnetic_langchain.store import MagneticStore
from tests.langchain.store.helpers import DIMS, CharProfileEmbeddings


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += 60 * minutes


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ttl_store(tmp_path: Path, clock: Clock) -> Any:
    index = {"dims": DIMS, "embed": CharProfileEmbeddings(DIMS), "fields": ["text"]}
    with MagneticStore(str(tmp_path / "ttl"), index=index, clock=clock) as store:
        yield store


def test_supports_ttl_and_expired_items_are_omitted(ttl_store: MagneticStore, clock: Clock) -> None:
    assert ttl_store.supports_ttl
    ns = ("foo",)
    ttl_store.put(ns, "item1", {"text": "bar"}, ttl=1)
    ttl_store.put(ns, "forever", {"text": "baz"})
    clock.advance(0.9)
    assert ttl_store.get(ns, "item1", refresh_ttl=True) is not None  # restarts the clock
    clock.advance(0.9)
    assert len(ttl_store.search(ns, query="bar", refresh_ttl=True)) == 2  # so does a search
    clock.advance(0.9)
    assert ttl_store.get(ns, "item1", refresh_ttl=False) is not None
    clock.advance(0.2)  # 1.1 minutes after the last refresh
    assert ttl_store.get(ns, "item1") is None
    assert [i.key for i in ttl_store.search(ns, query="bar")] == ["forever"]
    assert [i.key for i in ttl_store.search(ns)] == ["forever"]
    assert ttl_store.get(ns, "forever") is not None


def test_expired_only_namespaces_are_not_listed_and_sweep_deletes(
    ttl_store: MagneticStore, clock: Clock
) -> None:
    ttl_store.put(("omit", "expired"), "e", {"text": "gone"}, ttl=1)
    ttl_store.put(("omit", "control"), "c", {"text": "keep"})
    clock.advance(2)
    assert ttl_store.list_namespaces(prefix=("omit",)) == [("omit", "control")]
    memory = ttl_store._space(("omit", "expired")).memory
    assert memory.count() == 1  # expired but not yet swept
    assert ttl_store.sweep_ttl() == 1
    assert memory._closed or memory.count() == 0
    assert ttl_store.sweep_ttl() == 0
    assert ttl_store.get(("omit", "control"), "c") is not None


def test_refresh_does_not_resurrect_an_expired_item(ttl_store: MagneticStore, clock: Clock) -> None:
    ns = ("r",)
    ttl_store.put(ns, "expired", {"n": 0}, ttl=1)
    ttl_store.put(ns, "live", {"n": 1}, ttl=1)
    clock.advance(0.5)
    ttl_store.put(ns, "live", {"n": 1}, ttl=1)
    clock.advance(0.6)
    assert ttl_store.get(ns, "expired", refresh_ttl=True) is None
    assert ttl_store.get(ns, "live", refresh_ttl=True) is not None
    clock.advance(0.9)
    assert ttl_store.get(ns, "live") is not None
    assert ttl_store.get(ns, "expired") is None


def test_default_ttl_and_refresh_config(tmp_path: Path, clock: Clock) -> None:
    ttl = {"default_ttl": 1, "refresh_on_read": False}
    with MagneticStore(str(tmp_path), ttl=ttl, clock=clock) as store:
        store.put(("d",), "k", {"v": 1})
        store.put(("d",), "pinned", {"v": 2}, ttl=None)
        clock.advance(0.8)
        assert store.get(("d",), "k") is not None  # read, but refresh_on_read is off
        clock.advance(0.3)
        assert store.get(("d",), "k") is None
        assert store.get(("d",), "pinned") is not None


def test_background_sweeper_deletes_expired_items(tmp_path: Path) -> None:
    with MagneticStore(str(tmp_path)) as store:
        store.put(("s",), "k", {"v": 1}, ttl=0.5 / 60)  # half a second
        store.start_ttl_sweeper(0.2 / 60)
        deadline = time.time() + 10
        while store.list_namespaces() and time.time() < deadline:
            time.sleep(0.1)
        assert store.list_namespaces() == []
        assert store.stop_ttl_sweeper(timeout=5)


def test_bad_ttl_is_refused(tmp_path: Path) -> None:
    with MagneticStore(str(tmp_path)) as store:
        with pytest.raises(InvalidInputError, match="ttl"):
            store.put(("t",), "k", {"v": 1}, ttl=-1)
        assert store.get(("t",), "k") is None


def test_items_namespaces_and_ttls_survive_a_new_process(tmp_path: Path) -> None:
    path = str(tmp_path / "persist")
    with MagneticStore(path) as store:
        store.put(("users", "alice"), "a", {"v": 1})
        store.put(("users", "bob"), "b", {"v": 2}, ttl=1 / 120)  # expires in half a second
        store.put(("users", "bob"), "c", {"v": 3})
    time.sleep(0.6)
    script = textwrap.dedent(
        f"""
        from magnetic_langchain.store import MagneticStore
        with MagneticStore({path!r}) as store:
            print(sorted(store.list_namespaces()))
            print(store.get(("users", "alice"), "a").value)
            print(store.get(("users", "bob"), "b"))
            print([i.key for i in store.search(("users",), filter={{"v": {{"$gte": 2}}}})])
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "[('users', 'alice'), ('users', 'bob')]",
        "{'v': 1}",
        "None",
        "['c']",
    ]


def test_namespaces_are_isolated_in_storage(tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "iso"))
    try:
        store = MagneticStore(client=client)
        store.put(("tenant", "a"), "k", {"secret": "alpha-secret"})
        store.put(("tenant", "b"), "k", {"secret": "beta-secret"})
        cells = sorted(c.name for c in client.list_collections() if c.name.endswith("-cells"))
        assert len(cells) == 3  # the registry and one per namespace
        docs = [client.get_collection(n).get(include=["metadatas"]) for n in cells]
        holding_a = [n for n, d in zip(cells, docs) if "alpha-secret" in str(d["metadatas"])]
        holding_b = [n for n, d in zip(cells, docs) if "beta-secret" in str(d["metadatas"])]
        assert len(holding_a) == len(holding_b) == 1 and holding_a != holding_b
        store.close()
        with pytest.raises(ClosedError):
            store.get(("tenant", "a"), "k")
        again = MagneticStore(client=client)  # a client passed in is not closed
        assert again.get(("tenant", "b"), "k").value == {"secret": "beta-secret"}
        again.close()
    finally:
        client.close()


def test_a_prefix_separates_stores_in_one_database(tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "shared"))
    try:
        with (
            MagneticStore(client=client, prefix="one") as one,
            MagneticStore(client=client, prefix="two") as two,
        ):
            one.put(("n",), "k", {"v": 1})
            assert two.get(("n",), "k") is None and two.list_namespaces() == []
        with pytest.raises(InvalidInputError, match="prefix"):
            MagneticStore(client=client, prefix="bad prefix")
    finally:
        client.close()


def test_exported_from_the_package() -> None:
    import magnetic_langchain

    assert magnetic_langchain.MagneticStore is MagneticStore
    assert "MagneticStore" in magnetic_langchain.__all__


def test_reopening_with_another_index_is_refused_clearly(tmp_path: Path) -> None:
    from magnetic_core.errors import EmbedderMismatchError

    index = {"dims": DIMS, "embed": CharProfileEmbeddings(DIMS)}
    with MagneticStore(str(tmp_path), index=index) as store:
        store.put(("users", "alice"), "k", {"text": "hello"})
    with MagneticStore(str(tmp_path)) as plain:
        for read in (lambda: plain.get(("users", "alice"), "k"), plain.list_namespaces):
            with pytest.raises(EmbedderMismatchError, match=r"\('users', 'alice'\).*index config"):
                read()
