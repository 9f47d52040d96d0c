"""A structured-query translator, so LangChain's ``SelfQueryRetriever`` can use the store.

``SelfQueryRetriever`` lets an LLM turn a question into a query plus a metadata filter
(``and(eq("genre", "scifi"), gt("year", 2000))``); the translator turns that filter into
the store's Chroma-style ``where`` dict. Pass it explicitly, since LangChain only knows the
translators of the stores it ships::

    from langchain_classic.retrievers.self_query.base import SelfQueryRetriever
    retriever = SelfQueryRetriever.from_llm(
        llm, store, "Brief summary of a movie", metadata_field_info,
        structured_query_translator=MagneticTranslator(),
    )
"""

from __future__ import annotations

from typing import Any

from langchain_core.structured_query import (
    Comparator,
    Comparison,
    Operation,
    Operator,
    StructuredQuery,
    Visitor,
)

__all__ = ["MagneticTranslator"]


def _value(value: Any) -> Any:
    # The query language writes dates as {"date": "YYYY-MM-DD", "type": "date"}; metadata
    # holds them as ISO strings, which compare in date order.
    if isinstance(value, dict) and value.get("type") == "date" and "date" in value:
        return value["date"]
    if isinstance(value, dict) and value.get("type") == "datetime" and "datetime" in value:
        return value["datetime"]
    return value


class MagneticTranslator(Visitor):
    """Translates LangChain's structured queries into MagneticVectorStore filters.

    Comparators ``eq ne gt gte lt lte in nin`` and operators ``and or`` map one to one
    onto the store's filter operators; anything else is refused by LangChain's parser
    before the query reaches the store.

    Example:
        >>> from langchain_core.structured_query import Comparison, Comparator, Operation, Operator
        >>> f = Operation(operator=Operator.AND, arguments=[
        ...     Comparison(comparator=Comparator.EQ, attribute="genre", value="scifi"),
        ...     Comparison(comparator=Comparator.GT, attribute="year", value=2000)])
        >>> MagneticTranslator().visit_structured_query(
        ...     StructuredQuery(query="robots", filter=f, limit=None))
        ('robots', {'filter': {'$and': [{'genre': {'$eq': 'scifi'}}, {'year': {'$gt': 2000}}]}})
    """

    allowed_operators = (Operator.AND, Operator.OR)
    allowed_comparators = (
        Comparator.EQ,
        Comparator.NE,
        Comparator.GT,
        Comparator.GTE,
        Comparator.LT,
        Comparator.LTE,
        Comparator.IN,
        Comparator.NIN,
    )

    def _format_func(self, func: Operator | Comparator) -> str:
        self._validate_func(func)
        return f"${func.value}"

    def visit_operation(self, operation: Operation) -> dict[str, Any]:
        """``and(...)`` / ``or(...)`` as ``{"$and": [...]}`` / ``{"$or": [...]}``."""
        return {
            self._format_func(operation.operator): [a.accept(self) for a in operation.arguments]
        }

    def visit_comparison(self, comparison: Comparison) -> dict[str, Any]:
        """``gt("year", 2000)`` as ``{"year": {"$gt": 2000}}``."""
        value = _value(comparison.value)
        if comparison.comparator in (Comparator.IN, Comparator.NIN) and not isinstance(
            value, (list, tuple)
        ):
            value = [value]
        return {comparison.attribute: {self._format_func(comparison.comparator): value}}

    def visit_structured_query(
        self, structured_query: StructuredQuery
    ) -> tuple[str, dict[str, Any]]:
        """The query text and the search keyword arguments (``filter`` when there is one)."""
        if structured_query.filter is None:
            return structured_query.query, {}
        return structured_query.query, {"filter": structured_query.filter.accept(self)}
