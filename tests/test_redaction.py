"""The redactor: every registered secret, in every spelling a report gives it, becomes its
reference; a reproducer keeps the reference for the shell to expand."""

from __future__ import annotations

import html
import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_conformance.redaction import (
    QUERY_PLACEHOLDER,
    RedactingWriter,
    Redactor,
    console,
    open_text,
    write_text,
)
from rl_conformance.redaction import REDACTOR as SHARED

TOKEN = "s3cr3t-Tok+en/with=chars&<quote>'\""


@pytest.fixture
def redactor() -> Iterator[Redactor]:
    found = Redactor()
    found.add(TOKEN, "$DYNAMO_TOKEN")
    yield found


@pytest.mark.parametrize(
    "spelled",
    [
        lambda v: v,
        lambda v: json.dumps({"error": f"invalid token {v}"}),
        lambda v: html.escape(v),
        lambda v: shlex.quote(f"Authorization: Bearer {v}"),
        lambda v: "https://h/?t=" + __import__("urllib.parse").parse.quote(v, safe=""),
    ],
    ids=["raw", "json", "html", "shell", "percent"],
)
def test_every_spelling_of_a_secret_is_replaced(redactor: Redactor, spelled) -> None:
    text = spelled(TOKEN)
    redacted = redactor.redact(text)
    assert "s3cr3t" not in redacted
    assert "$DYNAMO_TOKEN" in redacted


def test_a_short_value_is_not_searched_for_in_free_text() -> None:
    redactor = Redactor()
    redactor.add("acme", "$FRONTEND_X_TENANT")
    assert redactor.redact("acme corp") == "acme corp"
    assert redactor.references() == ("$FRONTEND_X_TENANT",)


def test_a_marked_query_parameter_is_hidden_in_any_url() -> None:
    redactor = Redactor()
    redactor.mark_query_parameter("api-key")
    text = "GET http://w:9090/metrics?x=1&api-key=abc123 and <a href='/?api-key=zz&amp;y=2'>"
    redacted = redactor.redact(text)
    assert "abc123" not in redacted and "zz" not in redacted
    assert f"api-key={QUERY_PLACEHOLDER}" in redacted and "x=1" in redacted


def test_a_known_query_value_becomes_its_reference() -> None:
    redactor = Redactor()
    redactor.mark_query_parameter("key")
    redactor.add("0123456789abcdef", "$FRONTEND_KEY")
    assert redactor.redact("http://h/v1/models?key=0123456789abcdef") == (
        "http://h/v1/models?key=$FRONTEND_KEY"
    )


def test_a_shell_word_leaves_the_reference_to_the_shell(redactor: Redactor) -> None:
    word = redactor.shell_word("Authorization: Bearer $DYNAMO_TOKEN")
    assert word == '"Authorization: Bearer $DYNAMO_TOKEN"'
    expanded = subprocess.run(
        ["sh", "-c", f"printf %s {word}"],
        env={"DYNAMO_TOKEN": "xyz"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert expanded == "Authorization: Bearer xyz"
    assert redactor.shell_word("plain $HOME") == "'plain $HOME'"


def test_a_shell_word_with_an_exclamation_mark_still_expands_only_the_reference() -> None:
    redactor = Redactor()
    redactor.add("abcdefgh12345678", "$(cat '/run/token')")
    word = redactor.shell_word("Bearer! $(cat '/run/token') `x` $y")
    expanded = subprocess.run(
        ["sh", "-c", f"cat() {{ printf T; }}; printf %s {word}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert expanded == "Bearer! T `x` $y"


def test_resolve_gives_back_the_values_for_a_replay(redactor: Redactor) -> None:
    assert redactor.resolve("Bearer $DYNAMO_TOKEN") == f"Bearer {TOKEN}"


def test_a_secret_written_in_pieces_is_still_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    SHARED.add("piecewise-secret-value", "$PIECE")
    try:
        with console():
            print("a", "piecewise-", end="")
            print("secret-value", "b")
            print("no newline yet: piecewise-secret-value", end="")
        out = capsys.readouterr().out
    finally:
        SHARED.forget()
    assert "piecewise-secret-value" not in out
    assert out == "a $PIECE b\nno newline yet: $PIECE"


def test_files_written_through_the_redactor_hold_no_secret(tmp_path: Path) -> None:
    SHARED.add("file-secret-value", "$FILE_SECRET")
    try:
        write_text(tmp_path / "a.json", '{"token": "file-secret-value"}')
        with open_text(tmp_path / "b.jsonl") as stream:
            stream.write("file-secret-")  # a line is written whole, or at flush
            stream.write("value\n")
    finally:
        SHARED.forget()
    for path in tmp_path.iterdir():
        assert "file-secret-value" not in path.read_text()
        assert "$FILE_SECRET" in path.read_text()


def test_a_redacting_stream_offers_no_raw_buffer(tmp_path: Path) -> None:
    with open_text(tmp_path / "c.txt") as stream:
        assert isinstance(stream, RedactingWriter)
        assert not hasattr(stream, "buffer")  # bytes written there would pass unredacted
        assert stream.fileno() == stream.inner.fileno()
