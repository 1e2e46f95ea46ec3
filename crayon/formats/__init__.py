"""Format interop: reading and writing other projects' tokenizer files.

- ``tiktoken_io``: ``.tiktoken`` vocabulary files (base64 token, rank per line).
- ``hf_io``: HF tokenizers' ``tokenizer.json`` (byte-level BPE models), reading and writing.
- ``hf_normalize``: HF's normalizers, one function from text to text each.
- ``hf_pretokenize``: HF's pre-tokenizers, GPT-2's byte-level characters and the Oniguruma regex translation.
- ``hf_postprocess``: HF's post-processors (the ids ``add_special_tokens=True`` adds, type ids, offset trims).
- ``hf_decode``: HF's decoders (the text ``decode`` makes of the token strings).

The BPE spec itself lives in ``crayon.reference``; these modules only translate files to and from it.
"""
