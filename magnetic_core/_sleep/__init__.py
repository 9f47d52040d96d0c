"""Sleep mode: consolidating the hierarchy and the framework-free half of the LLM review.

``plan`` plans a pass (merges, absorptions, splits), whose steps are in ``steps``; ``sleeper``
applies a pass atomically (its intent log is ``journal``), on demand or in the background;
``review`` chooses which facts go into which LLM call and ``llm_json`` repairs the answers;
``consolidate`` runs the review over a store; ``supersession`` keeps contradiction and
supersession links. Private.
"""
