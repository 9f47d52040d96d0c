"""numba's on-disk cache of the compiled kernels, made stale by a change to any kernel module.

numba stamps a cached kernel with its own source file only, yet a kernel compiles in every
compiled function it calls, and ours call across modules (``pointers`` into ``kernels``,
``kernels`` into ``fusion_kernel`` and ``join_kernel``, ``bm25`` into ``join_kernel``).
With numba's stamp, changing only ``pointers.py`` left every cached kernel of the other
modules running the old code until someone deleted the cache by hand (numba documents
this limit of its cache). Here the stamp of every kernel of the package also holds a
digest of all the package's kernel modules (:data:`KERNEL_MODULES`), so a change to any of
them recompiles the kernels on their next use.

:func:`install` puts locators with that stamp ahead of numba's for this package's files
(other packages keep numba's); it runs when this module is imported, which
``magnetic_core`` does before any kernel module. Where and how numba writes its cache
files is unchanged. A numba whose cache machinery is laid out differently is left as it
is (the stamps are then numba's own).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

__all__ = ["KERNEL_MODULES", "install", "kernel_digest"]

_ROOT = Path(__file__).resolve().parent

# Every module of the package that imports numba (its kernels), relative to the package
# (tests/core/test_kernel_cache.py checks that the list is complete).
KERNEL_MODULES = (
    "_index/clustering.py",
    "_index/kernels.py",
    "_search/fit_kernels.py",
    "_search/fusion_kernel.py",
    "_search/helper_kernels.py",
    "_search/join_kernel.py",
    "_search/kernels.py",
    "_search/pointers.py",
    "_search/select_kernel.py",
    "_text/bm25.py",
)


@functools.lru_cache(maxsize=4)
def kernel_digest(root: Path = _ROOT) -> bytes:
    """The SHA-256 of the kernel modules under ``root`` (names and contents, in order).

    A module whose source cannot be read (a frozen application ships compiled modules
    only) counts as empty: the stamp is then numba's own for that part, and no import
    fails over a cache stamp."""
    digest = hashlib.sha256()
    for name in KERNEL_MODULES:
        digest.update(name.encode())
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            digest.update(b"\0unreadable")
    return digest.digest()


class _PackageStamp:
    """A locator mixin: only for this package's files, stamped with :func:`kernel_digest`
    beside numba's stamp of the kernel's own file."""

    def get_source_stamp(self) -> Any:
        return (super().get_source_stamp(), kernel_digest())  # type: ignore[misc]

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        try:
            Path(py_file).resolve().relative_to(_ROOT)
        except ValueError:
            return None  # another package's function: numba's own locators
        return super().from_function(py_func, py_file)  # type: ignore[misc]


def _locators() -> tuple[list[type], list[type]] | None:
    """numba's list of locator classes and the file-backed ones ours extend, in its order
    (names of numba 0.62 on, with the leading underscore before); None when numba's
    caching module has neither."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if not isinstance(classes, list):
        return None
    bases = []
    for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"):
        base = getattr(caching, name, None) or getattr(caching, "_" + name, None)
        if base is None or base not in classes:
            return None
        bases.append(base)
    return classes, bases


def install() -> bool:
    """Put the package's locators ahead of numba's (once); whether they are in place."""
    found = _locators()
    if found is None:
        return False
    classes, bases = found
    if any(issubclass(c, _PackageStamp) for c in classes):
        return True
    ours = [type(f"Magnetic{b.__name__.lstrip('_')}", (_PackageStamp, b), {}) for b in bases]
    classes[0:0] = ours
    return True


install()
