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


@pytest.fixture(params=["inline", "helper"])
def helper_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The one-call queries on the calling thread (``inline``), or every one of them on the
    helper's second core (``helper``: as if each came in a stream), which must have been
    used by the end of the test."""
    from magnetic_core._search import helper

    if request.param == "inline":
        monkeypatch.setenv("MAGNETIC_SEARCH_HELPER", "0")
        yield "inline"
        return
    monkeypatch.delenv("MAGNETIC_SEARCH_HELPER", raising=False)
    if not helper.enabled():
        pytest.skip("this process has one core or no thread pool safe for the helper")
    monkeypatch.setattr(helper, "STREAM_GAP", float("inf"))
    monkeypatch.setattr(helper, "STALL_MARGIN", float("inf"))  # (no backing off)
    monkeypatch.setattr(helper._HELPER, "off_until", -float("inf"))
    before = helper._HELPER.beside
    yield "helper"
    assert helper._HELPER.beside > before, "no query went to the helper"
