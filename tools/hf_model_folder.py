"""Write a transformers model folder (tokenizer.json + tokenizer_config.json) with a byte-level BPE trained here.

The tokenizer is trained offline with HF tokenizers' own BpeTrainer; it has BOS/EOS/pad special tokens, a
TemplateProcessing post-processor that puts BOS before each text (and EOS after it with ``eos=True``) and a
chat template. ``pattern`` picks the pre-tokenizer: "gpt2" is HF's ByteLevel with its own regex; a tiktoken
pattern name gives the Split + ByteLevel form that Crayon writes (and runs with its compiled spanner).
Used by tests/test_hf_adapter.py and bench/transformers_adapter.py.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = {"bos": "<s>", "eos": "</s>", "pad": "<pad>"}


def write_model_folder(folder: str | Path, texts: list[str], *, vocab_size: int = 2000, pattern: str = "cl100k_base",
                       eos: bool = False) -> Path:
    """Train a byte-level BPE on ``texts`` and write ``folder`` as transformers reads it; returns ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from crayon.formats.hf_io import pipeline_to_hf
    from crayon.reference.pretokenize import PatternSpanner

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    if pattern == "gpt2":
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        config = json.loads(tokenizer.to_str())
        config.update(pipeline_to_hf(None, PatternSpanner(pattern)))
        tokenizer = Tokenizer.from_str(json.dumps(config))
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    ids = {name: tokenizer.token_to_id(token) for name, token in SPECIALS.items()}
    single = f"{SPECIALS['bos']} $A" + (f" {SPECIALS['eos']}" if eos else "")
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=f"{single} $B", special_tokens=[(SPECIALS[name], ids[name]) for name in ("bos", "eos")]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS["bos"],
        "eos_token": SPECIALS["eos"],
        "pad_token": SPECIALS["pad"],
        "model_max_length": 4096,
        "model_input_names": ["input_ids", "attention_mask"],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return folder
