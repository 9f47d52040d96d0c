"""Reading JSON answers of language models: repair, validation and the errors both adapters raise.

The core never calls a model. Both adapters (LangChain, LlamaIndex) hand the text a model
returned to :func:`parse_model_json`, which strips what small local models wrap around JSON
(``<think>`` blocks of reasoning models, code fences, prose before and after) and repairs
what they get wrong (single quotes, trailing commas, Python literals) with the ``json-repair``
library, then validates the result against a pydantic schema.

::

    MagneticError
    └── LLMError                     a language model failed to give a usable answer
        ├── LLMUnavailableError      the model could not be reached (server down, wrong host)
        └── StructuredOutputError    its answer could not be parsed or repaired into the schema
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from magnetic_core.errors import MagneticError, MissingDependencyError

__all__ = [
    "LLMError",
    "LLMUnavailableError",
    "Repair",
    "StructuredOutputError",
    "format_instructions",
    "is_unreachable",
    "parse_model_json",
    "strip_reasoning",
]

S = TypeVar("S", bound=BaseModel)

logger = logging.getLogger(__name__)

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^\s*<(think|thinking|reasoning)>.*$", re.DOTALL | re.IGNORECASE)
_CLOSE_ONLY = re.compile(r"^.*?</(think|thinking|reasoning)>", re.DOTALL | re.IGNORECASE)


class LLMError(MagneticError):
    """A language model did not give a usable answer (it raised, or answered nonsense)."""


class LLMUnavailableError(LLMError):
    """The language model could not be reached: its server is down or the host is wrong."""


class StructuredOutputError(LLMError):
    """The model's answer could not be parsed or repaired into the requested schema.

    Attributes:
        raw: the last text the model returned.
    """

    def __init__(self, message: str, *, raw: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.raw = raw


def strip_reasoning(text: str) -> str:
    """Remove ``<think>...</think>`` blocks (and an unclosed or orphan-closed one)."""
    text = _THINK.sub("", text)
    if _CLOSE_ONLY.match(text):  # some servers drop the opening tag
        text = _CLOSE_ONLY.sub("", text, count=1)
    if _OPEN_THINK.match(text):  # reasoning cut off before any answer
        return ""
    return text


def format_instructions(schema: type[BaseModel]) -> str:
    """The instruction appended to a prompt when a model has no structured output of its own."""
    spec = json.dumps(schema.model_json_schema(), ensure_ascii=False)
    return (
        "Answer with one JSON object that conforms to this JSON schema, and nothing else "
        f"(no prose, no code fence):\n{spec}"
    )


def parse_model_json(text: str, schema: type[S]) -> S:
    """Parse a model's text answer into ``schema``, repairing common damage first.

    Args:
        text: what the model returned.
        schema: the pydantic model the answer must conform to.

    Returns:
        A validated instance of ``schema``.

    Raises:
        StructuredOutputError: no JSON could be recovered, or it does not fit the schema.

    Example:
        >>> from pydantic import BaseModel
        >>> class Answer(BaseModel):
        ...     ok: bool
        >>> parse_model_json("Sure! ```json\\n{'ok': True,}\\n```", Answer)
        Answer(ok=True)
    """
    cleaned = strip_reasoning(text).strip()
    if not cleaned:
        raise StructuredOutputError("the model returned no JSON (empty answer)", raw=text)
    candidates = _candidates(cleaned)
    if not candidates:
        raise StructuredOutputError(
            f"no JSON object found in the model's answer: {_preview(text)!r}", raw=text
        )
    first_error: ValidationError | None = None
    for candidate in candidates:
        try:
            return schema.model_validate(candidate)
        except ValidationError as e:
            first_error = first_error or e
    raise StructuredOutputError(
        f"the model's JSON does not match the schema {schema.__name__}: "
        f"{_short_errors(first_error)}",
        raw=text,
    )


class Repair(Generic[S]):
    """The parse-and-ask-again loop of a structured answer, without the model call.

    Both adapters, sync and async, drive the same loop: hand each answer text to
    :meth:`parse`; it returns the validated answer, or None when the model should be asked
    again (show it :attr:`feedback`); after ``retries`` failed retries it raises.

    Args:
        schema: the pydantic model of the answer.
        retries: how many times the model may be shown its parse error and asked again.

    Example:
        >>> from pydantic import BaseModel
        >>> class Answer(BaseModel):
        ...     ok: bool
        >>> repair = Repair(Answer, retries=1)
        >>> repair.parse("no JSON here") is None, repair.feedback[:27]
        (True, 'Your answer could not be us')
        >>> repair.parse('{"ok": true}')
        Answer(ok=True)
    """

    def __init__(self, schema: type[S], retries: int) -> None:
        self.schema, self.retries = schema, retries
        self.attempts = 0
        self.error: StructuredOutputError | None = None

    def parse(self, raw: str) -> S | None:
        """The answer in ``raw``, or None to ask again (the last error is :attr:`error`).

        Raises:
            StructuredOutputError: the last allowed answer could not be used either.
        """
        self.attempts += 1
        try:
            return parse_model_json(raw, self.schema)
        except StructuredOutputError as e:
            if self.attempts > self.retries:
                n = self.retries
                raise StructuredOutputError(
                    f"{e.message} (after {n} retr{'y' if n == 1 else 'ies'})",
                    raw=raw,
                    hint="use a model that follows JSON instructions better, or one with "
                    "structured output",
                ) from e
            logger.info("structured answer did not parse (%s); asking again", e.message)
            self.error = e
            return None

    @property
    def feedback(self) -> str:
        """What to tell the model after an answer that could not be used."""
        message = self.error.message if self.error is not None else "it was not JSON"
        return (
            f"Your answer could not be used: {message}. Reply again with only one JSON "
            f"object that conforms to the schema of {self.schema.__name__}: no prose, no "
            "code fence."
        )


def _candidates(text: str) -> list[Any]:
    """JSON values recoverable from ``text``, strict parse first, then repaired."""
    try:
        return _objects(json.loads(text))
    except ValueError:
        pass
    try:
        import json_repair
    except ImportError as e:  # pragma: no cover - installed with the adapters' extras
        raise MissingDependencyError(
            "json-repair is needed to repair a model's JSON",
            hint="pip install 'magnetic-storage[langchain]' (or [llamaindex])",
        ) from e
    value = json_repair.loads(text)
    return _objects(value)


def _objects(value: Any) -> list[Any]:
    # several JSON values in one answer come back as a list; a bare list is also a candidate
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)] + ([value] if value else [])
    return []


def _short_errors(error: ValidationError | None) -> str:
    if error is None:
        return "no object"
    parts = [f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in error.errors()]
    return "; ".join(parts[:5])


def _preview(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n] + "..."


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or anything it was raised from) says the model's server is not there."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        name = type(current).__name__
        if name in {"ConnectError", "ConnectTimeout", "APIConnectionError", "ReadTimeout"}:
            return True
        if "connect" in str(current).lower() and "refused" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False
