"""The toy vocabulary: layout, round trips, and the non-invertibility that matters."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fake_backends.model import tokenizer as tok


def test_vocabulary_layout() -> None:
    pieces = tok.pieces()
    assert len(pieces) == tok.VOCAB_SIZE - 263 == 32505
    assert len(set(pieces)) == len(pieces)
    assert all(len(p) > 1 and p.isascii() for p in pieces)
    assert any(p.startswith(" ") for p in pieces)
    assert tok.SPECIAL_NAMES[tok.EOS_ID] == "</s>"
    assert [tok.token_bytes(7 + b) for b in (0, 65, 255)] == [b"\x00", b"A", b"\xff"]


def test_specials_decode_to_nothing_but_have_names() -> None:
    for special in range(7):
        assert tok.token_bytes(special) == b""
        assert tok.display_text(special) == ""
        assert tok.token_text(special) == tok.SPECIAL_NAMES[special]
    assert tok.decode([tok.BOS_ID, 263, tok.EOS_ID]) == tok.pieces()[0]


@given(st.text(max_size=60))
def test_decode_inverts_encode(text: str) -> None:
    ids = tok.encode(text)
    assert all(7 <= i < tok.VOCAB_SIZE for i in ids)
    assert tok.decode(ids) == text


def test_encode_is_greedy_longest_match_without_bos() -> None:
    ids = tok.encode("hello world")
    assert tok.BOS_ID not in ids
    assert len(ids) < len("hello world")  # pieces, not bytes
    assert tok.encode("\u00e9") == [7 + 0xC3, 7 + 0xA9]  # byte fallback


def test_encode_of_decode_is_not_always_identity() -> None:
    # "ban" is a piece; "ba" followed by the byte "n" decodes to the same text.
    ba = 263 + tok.pieces().index("ba")
    ids = [ba, 7 + ord("n")]
    assert tok.decode(ids) == "ban"
    assert tok.encode(tok.decode(ids)) != ids


def test_byte_level_ids_never_use_pieces() -> None:
    ids = tok.byte_level_ids("hello")
    assert ids == [7 + b for b in b"hello"]
    assert ids != tok.encode("hello")


def test_chat_template() -> None:
    ids = tok.render_chat(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert ids[0] == tok.SYSTEM_ID
    assert ids[-1] == tok.ASSISTANT_ID
    assert ids.count(tok.END_ID) == 2
    assert tok.USER_ID in ids
    assert tok.decode(ids) == "be briefhi"
    parts = tok.render_chat([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert parts == [tok.USER_ID, *tok.encode("hi"), tok.END_ID, tok.ASSISTANT_ID]
