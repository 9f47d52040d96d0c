"""Where a query goes: centroid stage, cell stage, entity and BM25 stages, exact fallback.

``search.run_search`` runs the stages of a ``SearchPlan``; ``snapshot`` and ``sketch`` score
cells approximately before the exact rerank; ``topk`` selects the best k; ``restricted``
searches a given set of ids; ``views`` turns ranked rows into ``types.Hit`` views. Private.
"""
