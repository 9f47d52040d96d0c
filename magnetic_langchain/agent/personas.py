"""Personas: the agent's system prompts, kept in their own namespace of the store.

Personas and the name of the active one are cells of the namespace
:data:`PERSONA_NAMESPACE`, apart from the memories (a search of any other namespace never
sees them). Four built-ins always exist; ``set`` with a built-in's name overrides it and
``delete`` reverts the override. Nothing here embeds anything meaningful: the namespace uses
the hashing embedder, so persona commands load no model.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_langchain.agent.errors import PersonaError

__all__ = [
    "BUILTIN_PERSONAS",
    "DEFAULT_PERSONA",
    "PERSONA_NAMESPACE",
    "Persona",
    "PersonaBook",
]

PERSONA_NAMESPACE = "magnetic-personas"
"""The namespace holding personas and the active persona's name."""
DEFAULT_PERSONA = "default"

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_ACTIVE_ID = "setting:active-persona"
_PREFIX = "persona:"


@dataclass(frozen=True)
class Persona:
    """A named system prompt.

    Attributes:
        name: lower-case name (letters, digits, ``-`` and ``_``).
        prompt: the system prompt text.
        builtin: whether the name is one of the built-ins.
        customised: a built-in whose text was overridden with ``set``.
    """

    name: str
    prompt: str
    builtin: bool = False
    customised: bool = False


BUILTIN_PERSONAS: dict[str, Persona] = {
    p.name: p
    for p in (
        Persona(
            "default",
            "You are a helpful assistant with a long-term memory. Be concise and friendly, "
            "and say so when you do not know something.",
            builtin=True,
        ),
        Persona(
            "storyteller",
            "You are a vivid, imaginative storyteller. Write in concrete sensory detail, keep "
            "characters, places and the rules of the world consistent with what was "
            "established, and end passages with a hook.",
            builtin=True,
        ),
        Persona(
            "critic",
            "You are a sharp, fair critic. Point out weaknesses, unstated assumptions and "
            "contradictions first, then what works, and suggest concrete improvements.",
            builtin=True,
        ),
        Persona(
            "senior-engineer",
            "You are a senior software engineer. Give direct, practical answers, prefer "
            "simple designs and well-kept libraries, name trade-offs and failure modes, and "
            "show short code when it helps.",
            builtin=True,
        ),
    )
}
"""The built-in personas, always available."""


def _check_name(name: str) -> str:
    clean = name.strip().lower() if isinstance(name, str) else ""
    if not _NAME.match(clean):
        raise PersonaError(
            f"invalid persona name {name!r}",
            hint="use 1-40 letters, digits, '-' or '_', starting with a letter or digit",
        )
    return clean


class PersonaBook:
    """Read and change the personas of one store.

    Args:
        memory: the memory of the :data:`PERSONA_NAMESPACE` namespace (see :meth:`open`).

    Example:
        >>> import tempfile
        >>> with PersonaBook.open(path=tempfile.mkdtemp()) as book:
        ...     _ = book.set("pirate", "You talk like a pirate.")
        ...     _ = book.use("pirate")
        ...     book.active().name
        'pirate'
    """

    def __init__(self, memory: MagneticMemory) -> None:
        self.memory = memory

    @classmethod
    def open(cls, *, path: str | None = None, client: Any = None) -> PersonaBook:
        """Open the personas of the store at ``path`` (or behind a Chroma ``client``)."""
        kwargs: dict[str, Any] = {"client": client} if client is not None else {"path": path}
        memory = MagneticMemory(namespace=PERSONA_NAMESPACE, embedder=HashingEmbedder(), **kwargs)
        return cls(memory)

    def close(self) -> None:
        """Close the underlying memory."""
        self.memory.close()

    def __enter__(self) -> PersonaBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _custom(self) -> dict[str, str]:
        cells = self.memory.get(filter={"kind": "persona"})
        return {c.metadata["name"]: c.text for c in cells}

    def list(self) -> list[Persona]:
        """Every persona, built-ins first, then custom ones by name."""
        custom = self._custom()
        out = [
            Persona(n, custom.get(n, p.prompt), builtin=True, customised=n in custom)
            for n, p in BUILTIN_PERSONAS.items()
        ]
        out += [Persona(n, custom[n]) for n in sorted(custom) if n not in BUILTIN_PERSONAS]
        return out

    def get(self, name: str) -> Persona:
        """The persona called ``name``.

        Raises:
            PersonaError: no persona has that name.
        """
        clean = _check_name(name)
        for persona in self.list():
            if persona.name == clean:
                return persona
        known = ", ".join(p.name for p in self.list())
        raise PersonaError(
            f"no persona named {clean!r}",
            hint=f"known personas: {known}; create one with `magnetic persona set NAME TEXT`",
        )

    def set(self, name: str, prompt: str) -> Persona:
        """Create or replace the persona ``name`` (overrides a built-in of that name)."""
        clean = _check_name(name)
        if not isinstance(prompt, str) or not prompt.strip():
            raise PersonaError(
                f"the prompt of persona {clean!r} is empty", hint="give the persona's text"
            )
        meta = {"kind": "persona", "name": clean, "updated": time.time()}
        self.memory.add([prompt.strip()], metadatas=[meta], ids=[_PREFIX + clean])
        return self.get(clean)

    def delete(self, name: str) -> Persona | None:
        """Delete a custom persona, or revert a built-in's override.

        Returns:
            The built-in now in force again, or None when a custom persona was deleted.

        Raises:
            PersonaError: the persona does not exist, or is a built-in never overridden.
        """
        persona = self.get(name)
        if persona.builtin and not persona.customised:
            raise PersonaError(
                f"{persona.name!r} is a built-in persona and cannot be deleted",
                hint="override its text with `magnetic persona set` instead",
            )
        self.memory.delete(ids=[_PREFIX + persona.name])
        if persona.builtin:
            return BUILTIN_PERSONAS[persona.name]
        if self._active_name() == persona.name:
            self.memory.delete(ids=[_ACTIVE_ID])
        return None

    def use(self, name: str) -> Persona:
        """Make ``name`` the active persona (remembered across runs)."""
        persona = self.get(name)
        meta = {"kind": "setting", "key": "active_persona", "value": persona.name}
        self.memory.add([f"active persona: {persona.name}"], metadatas=[meta], ids=[_ACTIVE_ID])
        return persona

    def _active_name(self) -> str:
        cells = self.memory.get([_ACTIVE_ID])
        return str(cells[0].metadata["value"]) if cells else DEFAULT_PERSONA

    def active(self) -> Persona:
        """The active persona (the default assistant until another is chosen)."""
        name = self._active_name()
        try:
            return self.get(name)
        except PersonaError:
            return self.get(DEFAULT_PERSONA)
