"""The public surface of magnetic_core: an explicit, sorted __all__ that names real members."""

from __future__ import annotations

import magnetic_core


def test_all_is_sorted_and_complete():
    exported = magnetic_core.__all__
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(magnetic_core, name), name


def test_core_never_imports_the_frameworks():
    import subprocess
    import sys

    code = (
        "import sys, magnetic_core, magnetic_core.eval, magnetic_core._store.persistence;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('langchain_core', 'langchain', 'llama_index')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
