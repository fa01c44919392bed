"""A stream folded as it arrives, so that a stream of any length is judged without its events.

The client feeds every parsed payload of a stream to a `StreamFold` (`add`). The fold keeps
what the stream checks read from every event, compactly: the concatenated
`nvext.completion_token_ids` and each choice's selected logprobs as arrays of machine integers
and doubles, per-choice terminal counts, the first event that breaks each local rule, and the
last value of every other `nvext` key. Nothing else of an event survives its `add`.

Checks accept a fold where they take the list of payloads (`stream.single_terminal`,
`stream.nothing_after_terminal`, `stream.done_last`, `tokens.stream_concat`) or the body
`aggregate_stream` merges from it (`logprobs.present`, `logprobs.selected_alignment`,
`logprobs.finite_nonpositive`), and reach the verdict they reach on the full list
(`tests/checks/test_stream_fold.py` holds them to it). One limit: completions logprobs are
paired position by position across `token_logprobs`, `tokens` and `top_logprobs`; a stream
whose chunks carry those arrays in different lengths cannot be paired without holding them, and
`logprobs.selected_alignment` then reports where they stopped lining up.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .aggregate import DONE
from .base import MISSING, Folded, get_path, is_int, is_int_list
from .positions import (
    Position,
    completion_position,
    content_position,
    not_finite_nonpositive,
    own_top_disagreement,
)


class Ints:
    """Integers in a machine array (8 bytes each) while they fit in 64 bits, then in a list."""

    def __init__(self) -> None:
        self.values: array[int] | list[int] = array("q")

    def extend(self, values: list[int]) -> None:
        if isinstance(self.values, array):
            try:
                self.values.extend(array("q", values))
                return
            except OverflowError:
                self.values = self.values.tolist()
        self.values.extend(values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> int:
        return self.values[index]

    def tolist(self) -> list[int]:
        return self.values.tolist() if isinstance(self.values, array) else list(self.values)

    def equals(self, other: Any) -> bool:
        """`list(self) == list(other)`, without building either list when both fit an array."""
        if isinstance(other, Ints):
            other = other.values
        if isinstance(self.values, array):
            try:
                return self.values == (other if isinstance(other, array) else array("q", other))
            except (TypeError, OverflowError):
                pass
        return len(self.values) == len(other) and all(
            a == b for a, b in zip(self.values, other, strict=True)
        )

    @property
    def nbytes(self) -> int:
        if isinstance(self.values, array):
            return self.values.itemsize * len(self.values)
        return 0


@dataclass
class PositionsFold:
    """One choice's logprob positions along one path (chat `content` or completions
    `token_logprobs`): the selected values, token ids when given, and the first position that
    breaks a local rule."""

    selected: array[float] = field(default_factory=lambda: array("d"))
    odd: dict[int, Any] = field(default_factory=dict)
    """Positions whose selected logprob is not a float (an int, null, a string, absent)."""
    token_ids: dict[int, Any] | None = None
    token_id_column: array[int] | None = None
    own_disagreement: tuple[int, float, Any] | None = None
    """(position, the token's own top value, the selected value): the first disagreement."""
    not_finite: tuple[int, str, Any] | None = None
    """(position, label, value): the first logprob that is not a finite number <= 0."""

    def __len__(self) -> int:
        return len(self.selected)

    def add(self, position: Position) -> None:
        index = len(self.selected)
        value = position.logprob
        if type(value) is float:
            self.selected.append(value)
        else:
            self.selected.append(float("nan"))
            self.odd[index] = value
        if position.token_id is not None:
            self._token_id(index, position.token_id)
        if self.own_disagreement is None:
            own = own_top_disagreement(position)
            if own is not None:
                self.own_disagreement = (index, own, value)
        if self.not_finite is None:
            bad = not_finite_nonpositive(position)
            if bad is not None:
                self.not_finite = (index, *bad)

    def _token_id(self, index: int, token_id: Any) -> None:
        """Token ids are stored only where given: a column with -1 where absent, and the values
        a column cannot hold (negative, not integers) beside it."""
        if self.token_id_column is None:
            self.token_id_column = array("q")
            self.token_ids = {}
        column = self.token_id_column
        column.extend([-1] * (index - len(column)))
        if is_int(token_id) and 0 <= token_id < 2**63:
            column.append(token_id)
        else:
            column.append(-1)
            assert self.token_ids is not None
            self.token_ids[index] = token_id

    def token_id(self, index: int) -> Any:
        """The token id given at `index`, or None."""
        column = self.token_id_column
        if column is None or index >= len(column):
            return None
        if column[index] >= 0:
            return column[index]
        return (self.token_ids or {}).get(index)

    def value(self, index: int) -> Any:
        return self.odd[index] if index in self.odd else self.selected[index]

    def values(self) -> list[Any]:
        found: list[Any] = self.selected.tolist()
        for index, value in self.odd.items():
            found[index] = value
        return found


@dataclass
class ChoiceFold:
    """One choice of the merged stream, keyed by its `index` as `aggregate_stream` keys it."""

    index: Any
    logprobs: bool = False
    """A chunk carried a `logprobs` object for this choice."""
    lists: dict[str, int] = field(default_factory=dict)
    """Entries of each list-valued `logprobs` member, concatenated as `aggregate_stream` does."""
    scalars: dict[str, Any] = field(default_factory=dict)
    """The first value of each other `logprobs` member."""
    content: PositionsFold | None = None
    completion: PositionsFold | None = None
    unaligned_at: int | None = None
    """The event at which `tokens` / `top_logprobs` stopped lining up with `token_logprobs`."""

    def positions(self) -> PositionsFold | None:
        """The positions `logprobs.positions` reads from the merged choice, or None."""
        if not self.logprobs:
            return None
        if "content" in self.lists:
            return self.content or PositionsFold()
        if "token_logprobs" in self.lists:
            return self.completion or PositionsFold()
        return None

    def logprobs_summary(self) -> Any:
        """The merged `logprobs` member as evidence: lists by their length."""
        if not self.logprobs:
            return MISSING
        summary = {key: f"({count} entries)" for key, count in self.lists.items()}
        return {**self.scalars, **summary}

    def add(self, event: int, logprobs: dict[str, Any]) -> None:
        self.logprobs = True
        lists = self.lists
        before = (
            lists.get("token_logprobs", 0),
            lists.get("tokens", 0),
            lists.get("top_logprobs", 0),
        )
        for key, value in logprobs.items():
            if type(value) is list:
                lists[key] = lists.get(key, 0) + len(value)
            elif key not in lists and key not in self.scalars:
                self.scalars[key] = value
        content = logprobs.get("content")
        if type(content) is list and content:
            if self.content is None:
                self.content = PositionsFold()
            for entry in content:
                self.content.add(content_position(entry))
        values = logprobs.get("token_logprobs")
        raw_tokens, raw_tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
        if type(values) is list or type(raw_tokens) is list or type(raw_tops) is list:
            self._completion(
                event,
                before,
                values if type(values) is list else [],
                raw_tokens if type(raw_tokens) is list else [],
                raw_tops if type(raw_tops) is list else [],
            )

    def _completion(
        self,
        event: int,
        before: tuple[int, int, int],
        values: list[Any],
        tokens: list[Any],
        tops: list[Any],
    ) -> None:
        """Pair this chunk's `tokens` and `top_logprobs` with its `token_logprobs`, which is
        how the merged arrays pair them as long as every member so far has as many entries as
        `token_logprobs`."""
        if self.completion is None:
            self.completion = PositionsFold()
        done, *counts = before
        if self.unaligned_at is None:
            for count, given in zip(counts, (tokens, tops), strict=True):
                if (given and count != done) or (values and count > done):
                    self.unaligned_at = event
        for index, value in enumerate(values):
            self.completion.add(
                completion_position(
                    value,
                    tokens[index] if index < len(tokens) else MISSING,
                    tops[index] if index < len(tops) else None,
                )
            )


class StreamFold(Folded):
    """Every payload of one stream, folded: see the module docstring."""

    def __init__(self) -> None:
        self.payloads = 0
        self.done = 0
        self.last: Any = MISSING
        self.unparseable: tuple[int, str] | None = None
        self.terminals: Counter[str] = Counter()
        self._finished: set[str] = set()
        self.finish_reasons: dict[str, Any] = {}
        """Each choice's first finish reason, by its index (as a string)."""
        self.after_terminal: tuple[int, str, int, Any] | None = None
        self.ids = Ints()
        """`nvext.completion_token_ids` of every chunk, concatenated."""
        self.ids_error: tuple[int, Any] | None = None
        """(event, value): the first chunk whose `completion_token_ids` is not an integer array."""
        self.choices: dict[Any, ChoiceFold] = {}
        self.nvext: dict[str, Any] = {}
        """Every `nvext` member but `completion_token_ids`: the last chunk's value."""

    def __repr__(self) -> str:
        return f"StreamFold({self.payloads} events, {len(self.ids)} ids)"

    def add(self, event: int, payload: Any) -> None:
        """Fold the payload of event number `event` (the string `[DONE]` for the terminator)."""
        self.payloads += 1
        self.last = payload
        if not isinstance(payload, dict):
            if payload == DONE:
                self.done += 1
            return
        choices = payload.get("choices")
        if type(choices) is list:
            for position, choice in enumerate(choices):
                self._choice(event, position, choice)
        nvext = payload.get("nvext")
        if type(nvext) is dict:
            self._nvext(event, nvext)

    def add_unparseable(self, event: int, detail: str) -> None:
        self.payloads += 1
        self.last = MISSING
        if self.unparseable is None:
            self.unparseable = (event, detail)

    def _choice(self, event: int, position: int, choice: Any) -> None:
        if type(choice) is dict:
            reason = choice.get("finish_reason")
            index = choice.get("index", MISSING)
        else:
            reason, index = get_path(choice, "finish_reason"), get_path(choice, "index")
        key = str(index if index is not MISSING else position)
        if self.after_terminal is None and key in self._finished:
            self.after_terminal = (event, key, position, choice)
        if reason not in (None, MISSING):
            self.terminals[key] += 1
            self.finish_reasons.setdefault(key, reason)
            self._finished.add(key)
        if not isinstance(choice, dict):
            return
        merged_key = choice.get("index", position)
        try:
            merged = self.choices.get(merged_key)
        except TypeError:  # an unhashable index: no merged choice to fold it into
            return
        if merged is None:
            merged = self.choices[merged_key] = ChoiceFold(merged_key)
        logprobs = choice.get("logprobs")
        if type(logprobs) is dict:
            merged.add(event, logprobs)

    def _nvext(self, event: int, nvext: dict[str, Any]) -> None:
        for key, value in nvext.items():
            if key != "completion_token_ids":
                self.nvext[key] = value
            elif self.ids_error is None:
                if is_int_list(value):
                    self.ids.extend(value)
                else:
                    self.ids_error = (event, value)

    def merged_choices(self) -> list[ChoiceFold]:
        """The choices in the order of `aggregate_stream(...)["choices"]`."""
        return [self.choices[key] for key in sorted(self.choices, key=str)]

    @property
    def nbytes(self) -> int:
        """Bytes held in arrays (ids, selected logprobs, token ids): what grows with the
        stream."""
        total = self.ids.nbytes
        for choice in self.choices.values():
            for found in (choice.content, choice.completion):
                if found is not None:
                    total += found.selected.itemsize * len(found.selected)
                    if found.token_id_column is not None:
                        total += found.token_id_column.itemsize * len(found.token_id_column)
        return total
