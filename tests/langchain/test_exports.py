"""The public surface of magnetic_langchain: an explicit, sorted ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import magnetic_langchain


def test_all_is_sorted_and_complete():
    names = magnetic_langchain.__all__
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(magnetic_langchain, name) is not None, name
    public = {
        n
        for n, v in vars(magnetic_langchain).items()
        if not n.startswith("_") and getattr(v, "__module__", "").startswith("magnetic_langchain.")
    }
    assert public <= set(names), public - set(names)


def test_every_module_declares_its_exports():
    for info in pkgutil.iter_modules(magnetic_langchain.__path__):
        module = importlib.import_module(f"magnetic_langchain.{info.name}")
        assert module.__doc__ and module.__doc__.strip(), info.name
        exported = module.__all__
        assert exported == sorted(exported), info.name
        for name in exported:
            assert hasattr(module, name), f"{info.name}.{name}"
