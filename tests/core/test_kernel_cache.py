"""numba's cache of the kernels goes stale when any kernel module changes, not only the
kernel's own file, and stays valid when no kernel module changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import magnetic_core
from magnetic_core import _kernel_cache
from magnetic_core._search import fusion_kernel, join_kernel, kernels

PACKAGE = Path(magnetic_core.__file__).resolve().parent

# One compiled call in a fresh process on the copy of the package at argv[1]: whether the
# kernel came from the cache.
_CALL = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import magnetic_core
assert magnetic_core.__file__.startswith(sys.argv[1]), magnetic_core.__file__
from magnetic_core._search.join_kernel import merge_unique
assert merge_unique(np.arange(3), np.arange(1, 5)).tolist() == [0, 1, 2, 3, 4]
stats = merge_unique.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values())}))
"""


def test_the_stamped_modules_are_every_module_that_compiles():
    compiling = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^(from numba\b|import numba\b)", path.read_text(), re.MULTILINE)
    }
    assert compiling == set(_kernel_cache.KERNEL_MODULES)


def test_the_package_kernels_are_cached_under_the_package_stamp():
    for kernel in (kernels.top_k, join_kernel.merge_unique, fusion_kernel.settled_top):
        locator = kernel._cache._impl._locator
        assert isinstance(locator, _kernel_cache._PackageStamp)
        assert locator.get_source_stamp()[1] == _kernel_cache.kernel_digest()


def test_the_digest_follows_the_sources_and_survives_a_missing_one(tmp_path: Path):
    for name in _kernel_cache.KERNEL_MODULES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE / name, tmp_path / name)
    assert _kernel_cache.kernel_digest(tmp_path) == _kernel_cache.kernel_digest()
    (tmp_path / "_text" / "bm25.py").write_text("# changed\n")
    changed = _kernel_cache.kernel_digest.__wrapped__(tmp_path)
    assert changed != _kernel_cache.kernel_digest()
    (tmp_path / "_text" / "bm25.py").unlink()  # shipped compiled only: no source to read
    missing = _kernel_cache.kernel_digest.__wrapped__(tmp_path)
    assert missing not in (changed, _kernel_cache.kernel_digest())


def test_a_change_to_another_kernel_module_recompiles_a_cached_kernel(tmp_path: Path):
    """``merge_unique`` lives in join_kernel.py; changing pointers.py (which it does not
    even call) must drop its cached code, and changing a module without kernels must not."""
    copy = tmp_path / "magnetic_core"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}

    def call() -> dict[str, int]:
        done = subprocess.run(
            [sys.executable, "-c", _CALL, str(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=300,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert call() == {"hits": 0, "misses": 1}  # compiled and written to the cache
    assert call() == {"hits": 1, "misses": 0}  # read back
    with open(copy / "_search" / "pointers.py", "a") as f:
        f.write("\n# an edit in another kernel module\n")
    assert call() == {"hits": 0, "misses": 1}  # stale: compiled again
    assert call() == {"hits": 1, "misses": 0}
    with open(copy / "memory.py", "a") as f:
        f.write("\n# an edit outside the kernels\n")
    assert call() == {"hits": 1, "misses": 0}  # the kernels' cache stays
