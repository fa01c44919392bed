"""Toy vocabulary, encoder, decoder and chat template.

The vocabulary is large (32768 ids) and built so that tokenizing a decoded text does
NOT always give back the sampled ids: multi-character pieces overlap (``"ba"`` + ``"ba"``
decodes to ``"baba"``, which is itself a piece).  That is deliberate: it lets the
conformance suite tell an engine-authoritative token sequence from one reconstructed by
re-tokenizing text, which is the failure mode the RL contract warns about.

Layout:

* ids 0..6 are special tokens; they decode to ``""`` in generated text but have a
  display name (``"</s>"`` ...) that a worker puts in logprob ``token`` fields;
* ids 7..262 are the single bytes 0x00..0xFF (the fallback of the encoder);
* ids 263..32767 are deterministic, distinct, multi-character ASCII pieces.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

VOCAB_SIZE = 32768

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
USER_ID = 3
ASSISTANT_ID = 4
SYSTEM_ID = 5
END_ID = 6

SPECIAL_NAMES: tuple[str, ...] = (
    "<pad>",
    "<s>",
    "</s>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|end|>",
)

FIRST_BYTE_ID = 7
FIRST_PIECE_ID = FIRST_BYTE_ID + 256
PIECE_COUNT = VOCAB_SIZE - FIRST_PIECE_ID

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_CODAS = "nrslmtk"
_PUNCTUATION = (", ", ". ", "! ", "? ", ": ", "; ", "\n\n", "  ", " -", "...")

ROLE_IDS: Mapping[str, int] = {
    "system": SYSTEM_ID,
    "developer": SYSTEM_ID,
    "user": USER_ID,
    "tool": USER_ID,
    "assistant": ASSISTANT_ID,
}


def _syllables() -> list[str]:
    """Consonant-vowel syllables, then the same with a closing consonant."""
    open_ = [c + v for c in _CONSONANTS for v in _VOWELS]
    closed = [s + k for s in open_ for k in _CODAS]
    return open_ + closed


@functools.cache
def pieces() -> tuple[str, ...]:
    """The 32505 multi-character pieces, in id order (id = FIRST_PIECE_ID + index)."""
    syl = _syllables()
    out: list[str] = list(_PUNCTUATION)
    out += syl
    out += [" " + s for s in syl]
    two = (a + b for a in syl for b in syl)
    spaced = True
    for word in two:
        if len(out) >= PIECE_COUNT:
            break
        # Alternate: word, then " word" for the next one; keeps both shapes common.
        out.append((" " + word) if spaced else word)
        spaced = not spaced
    result = tuple(out[:PIECE_COUNT])
    if len(set(result)) != PIECE_COUNT:  # pragma: no cover - construction invariant
        raise AssertionError("toy pieces are not distinct")
    return result


@functools.cache
def _piece_table() -> tuple[dict[bytes, int], dict[bytes, tuple[int, ...]]]:
    """Piece bytes -> id, and each piece's first two bytes -> the lengths of the pieces that
    start with them, longest first (where the encoder's longest match may stop)."""
    table = {p.encode("ascii"): FIRST_PIECE_ID + i for i, p in enumerate(pieces())}
    lengths: dict[bytes, set[int]] = {}
    for piece in table:
        lengths.setdefault(piece[:2], set()).add(len(piece))
    return table, {head: tuple(sorted(found, reverse=True)) for head, found in lengths.items()}


def is_special(token_id: int) -> bool:
    """True for the seven control tokens, which never contribute generated text."""
    return 0 <= token_id < FIRST_BYTE_ID


def token_bytes(token_id: int) -> bytes:
    """The bytes a token contributes to generated text (specials contribute none)."""
    if not 0 <= token_id < VOCAB_SIZE:
        raise ValueError(f"token id {token_id} is outside the vocabulary")
    return _token_bytes_table()[token_id]


@functools.cache
def _token_bytes_table() -> tuple[bytes, ...]:
    """Every token's bytes, by id (looked up once per generated token)."""
    specials = [b""] * FIRST_BYTE_ID
    single = [bytes((byte,)) for byte in range(256)]
    return (*specials, *single, *(piece.encode("ascii") for piece in pieces()))


def token_text(token_id: int) -> str:
    """The worker's string for a token, as put in top-logprob ``token`` fields.

    Specials show their name (``"</s>"``); bytes outside ASCII show ``<0xHH>`` the way
    byte-fallback tokenizers print them.  The frontend's own rendering of a single token
    (``display_text``) differs for those, which is what makes the real frontend add an
    extra key to completions ``top_logprobs`` at an EOS position.
    """
    if is_special(token_id):
        return SPECIAL_NAMES[token_id]
    if token_id < FIRST_PIECE_ID:
        byte = token_id - FIRST_BYTE_ID
        return chr(byte) if byte < 0x80 else f"<0x{byte:02X}>"
    return pieces()[token_id - FIRST_PIECE_ID]


def display_text(token_id: int) -> str:
    """How the frontend renders one token on its own: its bytes, decoded leniently."""
    return token_bytes(token_id).decode("utf-8", errors="replace")


def decode(ids: Iterable[int]) -> str:
    """Concatenate the tokens' bytes and decode them as UTF-8 (specials vanish)."""
    return b"".join(token_bytes(i) for i in ids).decode("utf-8", errors="replace")


def encode(text: str) -> list[int]:
    """Greedy longest-match tokenization over the pieces, single bytes as fallback.

    No BOS is added: a text prompt and the ids it encodes to are the same prompt.
    """
    table, lengths = _piece_table()
    data = text.encode("utf-8")
    out: list[int] = []
    i = 0
    size = len(data)
    while i < size:
        for length in lengths.get(data[i : i + 2], ()):
            if length <= size - i:
                found = table.get(data[i : i + length])
                if found is not None:
                    out.append(found)
                    i += length
                    break
        else:
            out.append(FIRST_BYTE_ID + data[i])
            i += 1
    return out


def byte_level_ids(text: str) -> list[int]:
    """One byte token per UTF-8 byte: a tokenization that never uses the pieces."""
    return [FIRST_BYTE_ID + b for b in text.encode("utf-8")]


def message_text(content: object) -> str:
    """Text of an OpenAI message ``content`` (a string, a list of text parts, or null)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ValueError("message content parts must be objects with a 'text' string")
        return "".join(parts)
    raise ValueError("message content must be a string, a list of text parts, or null")


def render_chat(messages: Sequence[Mapping[str, object]]) -> list[int]:
    """Apply the toy chat template directly to ids.

    Each message is ``<|role|> content <|end|>``; the prompt ends with ``<|assistant|>``
    so the model continues as the assistant.  Rendering to ids (not to text first) keeps
    special tokens out of the text encoder.
    """
    out: list[int] = []
    for message in messages:
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLE_IDS:
            raise ValueError(f"unsupported message role {role!r}")
        out.append(ROLE_IDS[role])
        out.extend(encode(message_text(message.get("content"))))
        out.append(END_ID)
    out.append(ASSISTANT_ID)
    return out
