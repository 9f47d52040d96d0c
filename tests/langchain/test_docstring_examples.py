"""The examples in the public docstrings run and print what they say they print."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from magnetic_langchain import MagneticRetriever, MagneticVectorStore

_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(doc: str) -> list[tuple[str, str | None]]:
    """(code, expected output) pairs; an output block directly follows its code block."""
    found = [(m.start(), m.end(), m.group(1), _dedent(m.group(2))) for m in _BLOCK.finditer(doc)]
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(found):
        _, end, lang, code = found[i]
        nxt = found[i + 1] if i + 1 < len(found) else None
        if lang != "python":
            i += 1
            continue
        if nxt and not doc[end : nxt[0]].strip():
            pairs.append((code, nxt[3].strip()))
            i += 2
        else:
            pairs.append((code, None))
            i += 1
    return pairs


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "\n".join(x[indent:] for x in lines)


def _run(code: str, namespace: dict[str, Any]) -> str:
    """Run a block; return what it printed, or the repr of a final bare expression."""
    tree = compile(code, "<docstring>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _exec(tree, namespace)
        value = _eval(last, namespace) if last is not None else None
    printed = out.getvalue().strip()
    return printed if printed or value is None else repr(value)


def _exec(tree: ast.Module, namespace: dict[str, Any]) -> None:
    compiled = compile(tree, "<docstring>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def _eval(node: ast.Expr, namespace: dict[str, Any]) -> Any:
    expr = ast.Expression(node.value)
    compiled = compile(expr, "<docstring>", "eval", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.mark.parametrize("documented", [MagneticVectorStore, MagneticRetriever])
def test_docstring_examples_run(documented: type, tmp_path: Path, monkeypatch: Any):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace: dict[str, Any] = {}
    pairs = _blocks(documented.__doc__ or "")
    assert pairs and all(expected for _, expected in pairs[-1:])
    try:
        for code, expected in pairs:
            got = _run(code, namespace)
            if expected is not None:
                assert got == expected, code
    finally:
        for value in namespace.values():
            if isinstance(value, MagneticVectorStore):
                value.close()
