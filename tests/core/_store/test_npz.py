"""Snapshot arrays read from an uncompressed .npz, the large ones memory-mapped."""

from __future__ import annotations

import os

import numpy as np
import pytest

from magnetic_core._store.npz import NpzArrays

posix = pytest.mark.skipif(os.name != "posix", reason="mapping is used on POSIX only")


def _write(path, **arrays) -> None:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@posix
def test_large_members_are_mapped_equal_and_changes_stay_in_this_process(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {
        "vectors": rng.standard_normal((3000, 96)).astype(np.float32),  # 1.1 MB: mapped
        "small": np.arange(10),
        "fortran": np.asfortranarray(rng.standard_normal((700, 200))),
    }
    path = tmp_path / "a.npz"
    _write(path, **arrays)
    got = NpzArrays(path, mmap=True)
    assert sorted(got) == sorted(arrays) and len(got) == 3
    for name, value in arrays.items():
        assert np.array_equal(got[name], value) and got[name].dtype == value.dtype
    vectors = got["vectors"]
    assert isinstance(vectors.base, np.memmap) and type(vectors) is np.ndarray
    got.close()
    vectors[0] = 7.0  # copy-on-write: the file keeps its values
    path.unlink()  # as a write drops the snapshot while a memory still uses it
    _write(path, vectors=np.zeros((3000, 96), np.float32))  # and a close replaces it
    assert vectors[0].tolist() == [7.0] * 96
    assert np.array_equal(vectors[1:], arrays["vectors"][1:])
    again = NpzArrays(path, mmap=True)
    assert not again["vectors"].any()
    again.close()


def test_without_mapping_and_for_compressed_files_members_are_read(tmp_path):
    value = np.arange(400_000, dtype=np.int64)
    path = tmp_path / "c.npz"
    np.savez_compressed(path, big=value)
    for mmap in (True, False):
        got = NpzArrays(path, mmap=mmap)
        assert np.array_equal(got["big"], value) and not isinstance(got["big"].base, np.memmap)
        got.close()


@posix
def test_a_truncated_file_fails_to_read_rather_than_being_misread(tmp_path):
    path = tmp_path / "t.npz"
    _write(path, vectors=np.ones((5000, 64), np.float32), tail=np.arange(3))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception):  # noqa: B017, PT011 - any error: the caller rebuilds
        got = NpzArrays(path, mmap=True)
        got["vectors"]
