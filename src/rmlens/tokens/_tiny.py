"""A tiny byte-level BPE tokenizer with a chat template and tiny random Llama models.

For tests and runnable examples: built in well under a second, nothing downloaded.
"""

from __future__ import annotations

import torch

TINY_SPECIALS = ("<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>")
TINY_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_CORPUS = (
    "What, in one word, is the greatest thing ever? Love. The best thing is peace and joy. "
    "The worst thing ever is war, hate and pain. Good, great, bad, awful, kind, happy, sad. "
    "the the the and and of of to to in in is is it it was was for for on on with with "
    "hello world! 123 456 7890 :) ;) ... -- ?? !! \n\n \t "
) + "\n" * 64


def tiny_tokenizer(vocab_size: int = 300):
    """Byte-level BPE of about ``vocab_size`` ids (256 bytes, merges, 7 special tokens).

    Tokenizing with ``add_special_tokens=True`` prepends ``<s>``, and the chat template
    starts with ``<s>`` too: the setting where a second BOS slips in if one is careless.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(TINY_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        additional_special_tokens=list(TINY_SPECIALS[3:]),
    )
    fast.chat_template = TINY_TEMPLATE
    return fast


def _config(tokenizer, **overrides):
    from transformers import LlamaConfig

    settings = dict(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    settings.update(overrides)
    return LlamaConfig(**settings)


def tiny_causal_lm(tokenizer, seed: int = 0):
    """A 2-layer, 32-wide random Llama causal LM over ``tokenizer``'s vocabulary."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(_config(tokenizer)).eval()


def tiny_seq_cls(tokenizer, seed: int = 0, num_labels: int = 1):
    """A 2-layer random ``LlamaForSequenceClassification`` (the form of public RMs)."""
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(seed)
    return LlamaForSequenceClassification(_config(tokenizer, num_labels=num_labels)).eval()
