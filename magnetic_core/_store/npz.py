"""Reading an uncompressed ``.npz`` with its large arrays memory-mapped instead of copied.

``np.load`` of an ``.npz`` copies every member out of the archive and checks its CRC: for a
100K-cell index snapshot that is 230 MB read and copied (about 0.6-2.7 s on the benchmark
machine) before the first query, for vectors that a query mostly never reads. The
members ``np.savez`` writes are stored (not compressed), so a large one can be mapped in
place, copy-on-write (changes stay in this process), and the pages a query does not touch
are never read. Small members are read as usual.

Mapping is used only where a mapped file may be unlinked or replaced while in use (POSIX):
the snapshot is deleted before every write and replaced at close.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

__all__ = ["NpzArrays"]

_MAP_FROM = 1 << 20  # members of at least this many bytes are mapped
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip member's local file header


class NpzArrays(Mapping[str, np.ndarray]):
    """The arrays of one ``.npz`` file by name, each read (or mapped) on first access.

    Args:
        path: the file; it is opened here and closed by :meth:`close`.
        mmap: map large stored members (default: on POSIX systems).
    """

    def __init__(self, path: Path, mmap: bool | None = None) -> None:
        self.path = path
        self._npz = np.load(path, allow_pickle=False)
        self._mmap = os.name == "posix" if mmap is None else mmap
        self._got: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        got = self._got.get(name)
        if got is None:
            got = self._mapped(name)
            if got is None:
                got = self._npz[name]
            self._got[name] = got
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._npz.files)

    def __len__(self) -> int:
        return len(self._npz.files)

    def close(self) -> None:
        self._npz.close()  # mapped arrays keep their own mapping

    def _mapped(self, name: str) -> np.ndarray | None:
        """The member mapped in place, or None to read it normally."""
        if not self._mmap:
            return None
        info = self._npz.zip.getinfo(f"{name}.npy")
        if info.compress_type != zipfile.ZIP_STORED or info.file_size < _MAP_FROM:
            return None
        with open(self.path, "rb") as fh:
            fh.seek(info.header_offset)
            fields = _LOCAL_HEADER.unpack(fh.read(_LOCAL_HEADER.size))
            if fields[0] != b"PK\x03\x04":
                raise ValueError(f"{self.path}: member {name!r} has no local header")
            fh.seek(fields[-2] + fields[-1], os.SEEK_CUR)  # file name and extra field
            member = fh.tell()
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(fh)
            start = fh.tell()
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if dtype.hasobject or start - member + nbytes != info.file_size:
            return None  # not laid out as np.save writes it: read it the usual way
        mapped = np.memmap(
            self.path, dtype, mode="c", offset=start, shape=shape, order="F" if fortran else "C"
        )
        return np.asarray(mapped)  # a plain ndarray over the mapping (numba takes no memmap)
