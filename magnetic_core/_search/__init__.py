"""Where a query goes: centroid stage, cell stage, entity and BM25 stages, exact fallback.

``search.run_search`` runs the stages of a ``SearchPlan``; ``scorer`` (with ``scorer_state``
and ``sublists``) scores cells of large stores by int8 residual code before the exact rerank,
its inner loops compiled in ``kernels`` (numba); ``topk`` selects the best k; ``restricted``
searches a given set of ids; ``views`` turns ranked rows into ``types.Hit`` views. Private.
"""
