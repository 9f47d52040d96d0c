"""Where a cell is stored: Chroma collections, the write path, recovery and the catalog.

``persistence.ChromaStore`` is the only module that imports chromadb; ``codec`` encodes
metadata so it round-trips; ``writeback`` writes changed rows; ``journal`` makes multi-batch
writes atomic and counts writers' changes; ``state`` builds a whole ``MemoryState`` from what is
stored; ``catalog`` keeps what is not a vector; ``rebuild`` migrates old collections;
``concurrency`` is the readers-writer lock; ``deferred`` opens a store before its embedder is
known. Private.
"""
