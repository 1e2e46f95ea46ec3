"""Table-lookup tokenizers: character-level and word-level, each unit mapped to an id by a trained table.

They are complete tokenizers of their own (train, encode, decode, JSON files), not part of the BPE spec in
``crayon.reference`` and not a file format, so they live apart from both.
"""
