"""A scripted story model for the fake Ollama server: passages, fact extraction, conflicts.

Requests are told apart the way a real model would see them: the passage writer's system
prompt, the fact extractor's (its answer is the JSON of the facts table for the passage),
and the contradiction check (numbered facts; it reports the pairs listed in ``conflicts``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_ollama import numbered_facts


class StoryModel:
    """Writes ``passages`` in order (then filler); knows their facts and which facts conflict."""

    def __init__(
        self,
        passages: list[str],
        facts: dict[str, list[str]],
        conflicts: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> None:
        self.passages = list(passages)
        self.facts = facts
        self.conflicts = [frozenset(pair) for pair in conflicts]
        self.writing_prompts: list[str] = []
        self.checks: list[dict[int, str]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        user = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        if "Extract the facts" in system:
            passage = user.split("Passage:\n", 1)[1].strip()
            facts = [{"text": t, "kind": "character"} for t in self.facts.get(passage, [])]
            return {"content": json.dumps({"facts": facts})}
        if re.search(r"cannot both be true", system + user):
            listed = numbered_facts(body)
            self.checks.append(listed)
            pairs = [
                {"first": a, "second": b, "explanation": "both cannot hold"}
                for a in listed
                for b in listed
                if a < b and frozenset((listed[a], listed[b])) in self.conflicts
            ]
            return {"content": json.dumps({"contradictions": pairs})}
        self.writing_prompts.append(user)
        if self.passages:
            return {"content": self.passages.pop(0)}
        return {"content": f"Passage {len(self.writing_prompts)}: the road goes on."}
