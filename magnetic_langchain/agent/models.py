"""Choosing the chat model: ChatOllama by default, any provider through ``init_chat_model``.

Before a chat starts, :func:`check_ollama` asks the Ollama server (``/api/tags``,
``/api/show``) whether it runs, has the model and whether the model can call tools, so each
of those problems is one clear line instead of a stack trace in the middle of a reply.
:func:`explain_llm_failure` maps the errors a model raises mid-run to the same errors.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from magnetic_core.errors import MagneticError, MissingDependencyError
from magnetic_langchain.agent.errors import (
    LLMError,
    LLMUnavailableError,
    ModelNotFoundError,
    ToolsUnsupportedError,
)

__all__ = [
    "DEFAULT_MODEL",
    "check_ollama",
    "explain_llm_failure",
    "make_chat_model",
    "ollama_host",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "qwen2.5:3b"
"""A small local model that calls tools reliably."""
_TOOL_MODELS = "qwen2.5:3b, llama3.2, mistral-nemo"


def ollama_host(host: str | None) -> str:
    """The Ollama address in use: ``host``, else ``OLLAMA_HOST``, else the local default."""
    chosen = host or os.environ.get("OLLAMA_HOST") or "127.0.0.1:11434"
    return chosen if "://" in chosen else f"http://{chosen}"


def _unreachable(host: str, model: str) -> LLMUnavailableError:
    return LLMUnavailableError(
        f"cannot reach Ollama at {host}",
        hint=f"start it with `ollama serve` (and `ollama pull {model}`), or point "
        f"--ollama-host at a running server",
    )


def _not_pulled(host: str, model: str) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"Ollama at {host} does not have the model {model!r}",
        hint=f"run `ollama pull {model}`, or choose another with --model",
    )


def _no_tools(model: str) -> ToolsUnsupportedError:
    return ToolsUnsupportedError(
        f"the model {model!r} does not support tool calling, which the memory agent needs",
        hint=f"choose a model with tools, e.g. --model {DEFAULT_MODEL} ({_TOOL_MODELS})",
    )


def _same_model(a: str, b: str) -> bool:
    def full(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return full(a) == full(b)


def check_ollama(host: str | None, model: str, *, tools: bool = True) -> None:
    """Check that Ollama runs at ``host``, has ``model`` and, with ``tools``, that it calls tools.

    Raises:
        LLMUnavailableError: no server answers.
        ModelNotFoundError: the model is not pulled.
        ToolsUnsupportedError: the server reports the model lacks the ``tools`` capability.
    """
    import ollama

    address = ollama_host(host)
    client = ollama.Client(host=address)
    try:
        pulled = [m.model or "" for m in client.list().models]
        if not any(_same_model(name, model) for name in pulled):
            raise _not_pulled(address, model)
        capabilities = client.show(model).capabilities
    except (ConnectionError, OSError) as e:
        raise _unreachable(address, model) from e
    except ollama.ResponseError as e:
        raise explain_llm_failure(e, model=model, host=host) from e
    if tools and capabilities is not None and "tools" not in capabilities:
        raise _no_tools(model)


def explain_llm_failure(error: BaseException, *, model: str, host: str | None) -> MagneticError:
    """The :class:`MagneticError` for an exception a chat model raised."""
    for cause in _chain(error):
        if isinstance(cause, MagneticError):
            return cause
        text = str(cause).lower()
        if "does not support tools" in text:
            return _no_tools(model)
        if getattr(cause, "status_code", None) == 404 or ("not found" in text and "model" in text):
            return _not_pulled(ollama_host(host), model)
        if isinstance(cause, ConnectionError | OSError) or type(cause).__name__ in (
            "ConnectError",
            "ConnectTimeout",
        ):
            return _unreachable(ollama_host(host), model)
    root = _chain(error)[-1]
    return LLMError(
        f"the model {model!r} failed: {type(root).__name__}: {root}",
        hint="check that the model runs (e.g. `ollama run MODEL`)",
    )


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def make_chat_model(
    *, model: str = DEFAULT_MODEL, host: str | None = None, llm: str | None = None
) -> Any:
    """The chat model the CLI talks to.

    Args:
        model: the Ollama model (when ``llm`` is not given).
        host: the Ollama address (default ``OLLAMA_HOST`` or ``127.0.0.1:11434``).
        llm: ``PROVIDER:MODEL`` for LangChain's ``init_chat_model`` (e.g.
            ``openai:gpt-4o-mini``); ``ollama:NAME`` uses ChatOllama without it.

    Raises:
        MissingDependencyError: ``llm`` names a provider but ``langchain`` is not installed.
        LLMError: ``init_chat_model`` refused the provider or model.
    """
    if llm is not None and llm.startswith("ollama:"):
        model, llm = llm.removeprefix("ollama:"), None
    if llm is None:
        from langchain_ollama import ChatOllama

        return ChatOllama(model=model, base_url=ollama_host(host))
    if ":" not in llm:
        raise LLMError(f"--llm {llm!r} is not PROVIDER:MODEL", hint="e.g. --llm openai:gpt-4o-mini")
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as e:
        raise MissingDependencyError(
            f"--llm {llm} needs LangChain's init_chat_model, from the `langchain` package",
            hint="pip install langchain and the provider's package (e.g. langchain-openai), "
            "or use a local Ollama model with --model",
        ) from e
    try:
        return init_chat_model(llm)
    except Exception as e:  # providers raise their own types (missing keys, bad names)
        raise LLMError(
            f"cannot create the chat model {llm!r}: {type(e).__name__}: {e}",
            hint="install the provider's package and set its credentials (e.g. OPENAI_API_KEY)",
        ) from e
