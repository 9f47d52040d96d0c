"""A memory opened once its embedding dimension is known, for stores fed vectors only.

Chroma users build a store from a path and hand it vectors; the model runs elsewhere (the
LlamaIndex index, a LangChain pipeline). Such a store cannot know its dimension until the
first vectors arrive, unless the namespace already exists and says so in its stamp. Both
adapters open their memory through :class:`DeferredMemory`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from magnetic_core._store.persistence import open_client, read_stamp
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import Embedder, VectorsOnly
from magnetic_core.memory import MagneticMemory

__all__ = ["PRECOMPUTED", "DeferredMemory", "StoreMemory", "VectorsOnly"]

PRECOMPUTED = "precomputed"


class DeferredMemory:
    """Opens a :class:`MagneticMemory` when its dimension is known.

    Args:
        path: directory of the embedded Chroma store (ignored when ``client`` is given).
        client: any chromadb client; not closed by :meth:`close`.
        namespace: the namespace.
        config: engine settings.
        make_embedder: builds the stand-in embedder from ``(dim, stored_name or None)``.

    Example:
        >>> import tempfile
        >>> deferred = DeferredMemory(path=tempfile.mkdtemp())
        >>> deferred.existing() is None
        True
        >>> deferred.ensure(3).dim
        3
        >>> deferred.close()
    """

    def __init__(
        self,
        *,
        path: str = "./magnetic_memory",
        client: Any = None,
        namespace: str = "default",
        config: MemoryConfig | None = None,
        make_embedder: Callable[[int, str | None], Embedder] | None = None,
    ) -> None:
        self._owns_client = client is None
        self.client = client if client is not None else open_client(path)
        self.namespace = namespace
        self._config = config
        self._make = make_embedder or (lambda dim, name: VectorsOnly(dim, name or PRECOMPUTED))
        self._memory: MagneticMemory | None = None
        # Threads adding their first vectors at once must share one memory: a second one
        # on the namespace would hold its own index and never be closed.
        self._opening = threading.Lock()

    def existing(self) -> MagneticMemory | None:
        """The memory, opened from the stored stamp if the namespace exists; else None."""
        if self._memory is None:
            with self._opening:
                if self._memory is None:
                    stamp = read_stamp(self.client, self.namespace)
                    if stamp is not None:
                        self._open(stamp[1], stamp[0])
        return self._memory

    def ensure(self, dim: int) -> MagneticMemory:
        """The memory, opened for ``dim``-d vectors if it was not open (or stored) yet."""
        memory = self.existing()
        if memory is not None:
            return memory
        with self._opening:
            return self._memory if self._memory is not None else self._open(dim, None)

    def _open(self, dim: int, name: str | None) -> MagneticMemory:
        self._memory = MagneticMemory(
            client=self.client,
            namespace=self.namespace,
            embedder=self._make(dim, name),
            config=self._config,
        )
        return self._memory

    def close(self) -> None:
        """Close the memory, and the client if this object opened it."""
        if self._memory is not None:
            self._memory.close()
        if self._owns_client and hasattr(self.client, "close"):
            self.client.close()


class StoreMemory:
    """The memory behind an adapter's vector store, however the store was given it.

    One of: a memory passed in (``owned`` False: the store never closes it), a memory the
    store opened (``owned``), or a :class:`DeferredMemory` that opens once the first vectors
    tell the dimension. The LangChain and LlamaIndex vector stores both hold one.

    Args:
        memory: the open memory, or None while ``deferred`` has none yet.
        deferred: the deferred opener, or None.
        owned: whether closing the store closes ``memory``.
    """

    def __init__(
        self, memory: MagneticMemory | None, deferred: DeferredMemory | None, owned: bool
    ) -> None:
        self.memory, self.deferred, self.owned = memory, deferred, owned

    def current(self) -> MagneticMemory | None:
        """The memory, or None while a deferred one is still empty (nothing stored yet)."""
        if self.memory is None and self.deferred is not None:
            self.memory = self.deferred.existing()
        return self.memory

    def ensure(self, dim: int) -> MagneticMemory:
        """The memory, opened for ``dim``-d vectors if it was deferred and empty."""
        memory = self.current()
        if memory is None and self.deferred is not None:
            memory = self.memory = self.deferred.ensure(dim)
        if memory is None:  # neither given nor deferred: the constructors never build that
            raise ValueError("StoreMemory holds neither a memory nor a deferred one")
        return memory

    def close(self) -> None:
        """Close what the store opened (a memory passed in stays open). Idempotent."""
        if self.deferred is not None:
            self.deferred.close()
        elif self.owned and self.memory is not None:
            self.memory.close()
