"""Format interop: reading and writing other projects' tokenizer files.

- ``tiktoken_io``: ``.tiktoken`` vocabulary files (base64 token, rank per line).
- ``hf_io``: HF tokenizers' ``tokenizer.json`` (byte-level BPE models), reading and writing.
- ``hf_normalize``: HF's normalizers, one function from text to text each.
- ``hf_pretokenize``: HF's pre-tokenizers, GPT-2's byte-level characters and the Oniguruma regex translation.

The BPE spec itself lives in ``crayon.reference``; these modules only translate files to and from it.
"""
