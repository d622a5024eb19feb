"""Reliability figures measured on the local stack (``scripts/confiabilidade.py``)."""
