"""The search tests' shared store (one per test module; read only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .clustered import Store, build


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store per test module (read only: tests that write build their own)."""
    s = build(str(tmp_path_factory.mktemp("search-store")))
    yield s
    s.mem.close()
