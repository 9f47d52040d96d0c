"""``magnetic persona`` and personas inside ``magnetic chat``, through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetic_core import HashingEmbedder, MagneticMemory
from magnetic_langchain.agent.errors import PersonaError
from magnetic_langchain.agent.personas import BUILTIN_PERSONAS, PersonaBook
from tests.fake_ollama import FakeOllama, say
from tests.langchain.agent.conftest import Magnetic

PIRATE = "You talk like a pirate and call the user matey."


def test_personas_persist_switch_inside_chat_and_stay_out_of_memory(
    magnetic: Magnetic, tmp_path: Path
):
    assert magnetic("persona", "set", "Pirate", PIRATE).stdout == "saved persona pirate\n"
    assert magnetic("persona", "use", "pirate").stdout == "active persona: pirate\n"

    chat_input = "/persona\nAhoy?\n/persona use critic\nReview my plan.\n"
    with FakeOllama([say("Arr, matey!"), say("The plan has gaps.")]) as ollama:
        chat = magnetic("chat", input=chat_input, host=ollama.host)
    assert chat.returncode == 0, chat.stderr
    assert f"persona pirate: {PIRATE}" in chat.stdout
    assert "persona is now critic" in chat.stdout
    systems = [r["messages"][0]["content"] for r in ollama.chat_requests]
    assert systems[0].startswith(PIRATE)
    assert systems[1].startswith(BUILTIN_PERSONAS["critic"].prompt)
    # The conversation goes on under the new persona.
    assert [m["content"] for m in ollama.chat_requests[1]["messages"][1:3]] == [
        "Ahoy?",
        "Arr, matey!",
    ]

    listing = magnetic("persona", "list").stdout.splitlines()
    assert any(line.startswith("* critic") for line in listing)  # the switch persisted
    assert any(line.startswith("  pirate") and "(custom)" in line for line in listing)
    assert {line.split()[0] for line in listing} >= {"default", "storyteller", "senior-engineer"}

    refused = magnetic("persona", "delete", "critic")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "'critic' is a built-in persona and cannot be deleted" in refused.stderr
    assert magnetic("persona", "delete", "pirate").stdout == "deleted persona pirate\n"

    with MagneticMemory(
        path=str(tmp_path / "store"), namespace="default", embedder=HashingEmbedder()
    ) as memory:
        memory.add(["The user wants to sail around Madeira."])
        hits = memory.search("talk like a pirate persona critic", k=10)
    assert [h.text for h in hits] == ["The user wants to sail around Madeira."]


def test_persona_book_rules(tmp_path: Path):
    with PersonaBook.open(path=str(tmp_path / "store")) as book:
        assert book.active().name == "default"
        book.set("critic", "Be brutal.")
        assert book.get("critic").customised and book.get("critic").prompt == "Be brutal."
        assert book.delete("critic") == BUILTIN_PERSONAS["critic"]
        book.set("poet", "Answer in verse.")
        book.use("poet")
        book.delete("poet")
        assert book.active().name == "default"
        with pytest.raises(PersonaError, match="known personas: default, storyteller"):
            book.use("poet")
        for bad_name, bad_text in (("no spaces allowed", "x"), ("ok", "   ")):
            with pytest.raises(PersonaError):
                book.set(bad_name, bad_text)
