"""Text in: validating what callers hand over, entities, and the BM25 index.

``inputs`` checks texts, ids and metadata before anything changes; ``entities`` extracts the
names a query can route by; ``lexical`` is the BM25 stage; ``document_filter`` evaluates
``where_document``. Private.
"""
