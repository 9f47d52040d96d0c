"""``python -m magnetic_langchain.cli``: the ``magnetic`` command."""

from __future__ import annotations

from magnetic_langchain.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
