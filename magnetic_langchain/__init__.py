"""LangChain integration of MagneticStorage."""
