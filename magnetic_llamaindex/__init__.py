"""LlamaIndex integration of MagneticStorage."""
