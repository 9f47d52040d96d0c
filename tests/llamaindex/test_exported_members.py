"""The public surface of magnetic_llamaindex: an explicit, sorted __all__ of its own members."""

from __future__ import annotations

import magnetic_llamaindex


def test_all_is_sorted_unique_and_names_real_members():
    exported = magnetic_llamaindex.__all__
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(magnetic_llamaindex, name), name


def test_every_public_class_and_function_is_exported_and_defined_here():
    public = {
        name
        for name, member in vars(magnetic_llamaindex).items()
        if not name.startswith("_") and callable(member)
    }
    assert public == {n for n in magnetic_llamaindex.__all__ if not n.isupper()}
    for name in public:
        member = getattr(magnetic_llamaindex, name)
        assert member.__module__.startswith("magnetic_llamaindex."), name


def test_group_metadata_keys_match_the_langchain_adapter():
    import magnetic_langchain

    for key in ("EXPANDED_FROM_KEY", "GROUP_ID_KEY", "GROUP_LABEL_KEY"):
        assert getattr(magnetic_llamaindex, key) == getattr(magnetic_langchain, key), key
