"""The spec: pure-Python versions of every algorithm the fast engines run, written to be read.

Each module opens with the contract it shares with its twin in ``crayon.jit`` (same tokens, same tables).
Nothing here imports the layers above it (``crayon.jit``, ``crayon.gpu``, ``crayon.formats``, the
``Tokenizer``). A reading order, from text to tokens:

1. ``pretokenize`` - text -> spans: the pattern's regex, special-token splitting.
2. ``bpe`` - a span's bytes -> tokens by merge-rank BPE (the merge loop): the model everything is checked against.
3. ``trie`` - the vocabulary as a pointer trie; ``dat`` - the same trie packed into three arrays (double array).
4. ``backtrack`` - BPE's tokens in O(n) by backtracking over the trie, without the merge loop.
5. ``longest`` - greedy longest match over the DAT (not BPE: a different, faster model).
6. ``cache`` - the piece cache: span bytes -> tokens, so a repeated span costs one lookup.
7. ``engine`` - the engine interface every backend implements, and the reference engine: normalize -> spans ->
   model.
8. ``train`` - learning merges from a corpus.
9. ``regex_vm`` - any pre-tokenization regex compiled to tables and a backtracking matcher (the jit twin's spec).
10. ``wordpiece``, ``wordlevel``, ``unigram``, ``char_bpe`` - the models over characters: WordPiece, WordLevel
    (a word is a token), Unigram, SentencePiece-style BPE.
11. ``alignments`` - text whose characters remember their original spans (HF's alignments): the character
    offsets of tokens through normalizers and pre-tokenizers (each model's ``token_spans``).

File formats (tiktoken, HF ``tokenizer.json``, HF normalizers and pre-tokenizers) are in ``crayon.formats``.
"""
