"""Crayon's version, the one place it is written (pyproject.toml reads it; caches of compiled tokenizers
record it, so an upgrade rebuilds them)."""

__version__ = "0.1.0"
