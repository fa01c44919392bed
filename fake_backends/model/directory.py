"""``python -m fake_backends.model.directory DIR``: a Hugging Face style model directory.

Why: the real Dynamo frontend (and the real mocker) load a model *directory* to get the
tokenizer, the chat template and the EOS ids; they never see our Python tokenizer.  For the
real frontend to turn the ids our engine emits into the same text ``fake_backends.model.tokenizer
.decode`` gives, ``tokenizer.json`` must describe the toy vocabulary exactly.  This module
writes that description by hand (plain JSON, no ``tokenizers`` package needed).

Design of ``tokenizer.json`` (chosen over the Unigram + ByteFallback alternative because it
also makes the frontend's text ENCODING identical to ``fake_backends.model.tokenizer.encode``):

* pre-tokenizer ``ByteLevel`` without its regex: the whole text becomes one "word" whose bytes
  are spelled in GPT-2's printable byte alphabet (``" "`` is ``"Ġ"``, and so on);
* model ``WordPiece`` with an empty continuing-subword prefix: WordPiece is greedy
  longest-match-first over the word, which is exactly our encoder (every byte is in the
  vocabulary, so no unknown token ever appears);
* decoder ``ByteLevel``: maps the tokens back to bytes and decodes them as UTF-8 with U+FFFD
  replacement, exactly ``decode``;
* the seven specials are added tokens (``special: true``), so a frontend that skips special
  tokens renders them as ``""`` like ``decode`` does, and the chat template's role markers
  become ids 3..6 again.

The frontend encodes a special's *name* found in user text as that special (every HF
tokenizer does); our encoder spells it out byte by byte.  That is the one encoding difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fake_backends.model.tokenizer import (
    ASSISTANT_ID,
    BOS_ID,
    END_ID,
    EOS_ID,
    FIRST_BYTE_ID,
    PAD_ID,
    SPECIAL_NAMES,
    SYSTEM_ID,
    USER_ID,
    VOCAB_SIZE,
    pieces,
    token_bytes,
)

CONTEXT_LENGTH = 4096
# WordPiece turns a "word" longer than this into the unknown token; our whole prompt is one
# word, so the limit must exceed any prompt the context length allows (4096 tokens of at most
# a dozen characters each).
MAX_WORD_CHARS = 1_000_000

# Renders exactly ``fake_backends.model.tokenizer.render_chat``: ``<|role|>content<|end|>`` per
# message and a trailing ``<|assistant|>`` (always, like ``render_chat``).  Content may be a
# string, null, or a list of ``{"text": ...}`` parts.  One line: no template whitespace leaks.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] in ['system', 'developer'] -%}"
    + SPECIAL_NAMES[SYSTEM_ID]
    + "{%- elif message['role'] == 'assistant' -%}"
    + SPECIAL_NAMES[ASSISTANT_ID]
    + "{%- else -%}"
    + SPECIAL_NAMES[USER_ID]
    + "{%- endif -%}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- elif message['content'] is not none -%}"
    "{%- for part in message['content'] -%}{{ part['text'] }}{%- endfor -%}"
    "{%- endif -%}" + SPECIAL_NAMES[END_ID] + "{%- endfor -%}" + SPECIAL_NAMES[ASSISTANT_ID]
)


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character map, the one the ByteLevel components use."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\N{INVERTED EXCLAMATION MARK}"), ord("\N{NOT SIGN}") + 1),
        *range(ord("\N{REGISTERED SIGN}"), ord("\N{LATIN SMALL LETTER Y WITH DIAERESIS}") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


def vocabulary() -> dict[str, int]:
    """Token string (in the byte alphabet) -> id for all 32768 ids."""
    alphabet = byte_alphabet()
    vocab: dict[str, int] = {}
    for token_id in range(VOCAB_SIZE):
        if token_id < FIRST_BYTE_ID:
            text = SPECIAL_NAMES[token_id]
        else:
            text = "".join(alphabet[b] for b in token_bytes(token_id))
        if text in vocab:  # pragma: no cover - construction invariant
            raise AssertionError(f"token {token_id} collides with {vocab[text]} as {text!r}")
        vocab[text] = token_id
    return vocab


def _char_class(chars: Iterable[str], *, negate: bool = False) -> str:
    """A regex character class, every non-alphanumeric character written as ``\\x{HH}``."""
    body = "".join(
        c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):X}}}" for c in sorted(chars)
    )
    return f"[{'^' if negate else ''}{body}]"


def forced_boundary_splits() -> list[dict[str, Any]]:
    """Pre-tokenizer splits at places no vocabulary piece can span.

    Why: WordPiece on one unsplit "word" costs cubic time in its length (a 20 000-character
    prompt took 29 s).  Splitting only where *every* tokenization has a boundary keeps greedy
    longest-match identical to ``encode`` while bounding the chunks.  Two kinds of places
    are forced: around a character no piece contains, and before a space that no piece holds
    at an interior position after the preceding character.
    """
    alphabet: set[str] = set()
    before_inner_space: set[str] = set()
    for piece in pieces():
        alphabet.update(piece)
        before_inner_space.update(piece[i - 1] for i in range(1, len(piece)) if piece[i] == " ")
    return [
        {
            "type": "Split",
            "pattern": {"Regex": f"(?<!{_char_class(before_inner_space)}) "},
            "behavior": "MergedWithNext",
            "invert": False,
        },
        {
            "type": "Split",
            "pattern": {"Regex": _char_class(alphabet, negate=True)},
            "behavior": "Isolated",
            "invert": False,
        },
    ]


def tokenizer_json() -> dict[str, Any]:
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": name,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token_id, name in enumerate(SPECIAL_NAMES)
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [*forced_boundary_splits(), byte_level],
        },
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "WordPiece",
            "unk_token": SPECIAL_NAMES[PAD_ID],
            "continuing_subword_prefix": "",
            "max_input_chars_per_word": MAX_WORD_CHARS,
            "vocab": vocabulary(),
        },
    }


def config_json() -> dict[str, Any]:
    """A tiny qwen2-style config: the frontend reads the context length and the special ids."""
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": CONTEXT_LENGTH,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": PAD_ID,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "head_dim": 16,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "fake_backends_toy": True,
    }


def special_tokens_map() -> dict[str, Any]:
    return {
        "bos_token": SPECIAL_NAMES[BOS_ID],
        "eos_token": SPECIAL_NAMES[EOS_ID],
        "pad_token": SPECIAL_NAMES[PAD_ID],
        "unk_token": SPECIAL_NAMES[PAD_ID],
        "additional_special_tokens": [
            SPECIAL_NAMES[i] for i in (USER_ID, ASSISTANT_ID, SYSTEM_ID, END_ID)
        ],
    }


def tokenizer_config() -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": CONTEXT_LENGTH,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        **special_tokens_map(),
        "added_tokens_decoder": {
            str(token_id): {
                "content": name,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for token_id, name in enumerate(SPECIAL_NAMES)
        },
        "chat_template": CHAT_TEMPLATE,
    }


def generation_config() -> dict[str, Any]:
    """The frontend turns ``eos_token_id`` into the request's ``stop_token_ids_hidden``."""
    return {"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID], "pad_token_id": PAD_ID}


def write_model_dir(directory: Path) -> Path:
    """Write the five files into ``directory`` (created if needed) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": config_json(),
        "generation_config.json": generation_config(),
        "special_tokens_map.json": special_tokens_map(),
        "tokenizer_config.json": tokenizer_config(),
        "tokenizer.json": tokenizer_json(),
    }
    for name, content in files.items():
        (directory / name).write_text(
            json.dumps(content, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
    return directory


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fake_backends.model.directory",
        description="Write a model directory (tokenizer, chat template, config) for the toy "
        "vocabulary that the real Dynamo frontend and mocker can load.",
    )
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    write_model_dir(args.directory)
    print(args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
