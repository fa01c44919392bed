"""The fake's fast paths answer exactly what the plain ones would (speed is only ever measured by
`benchmarks/fake_throughput.py`, never asserted here)."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fake_backends.deployment.assembly import Assembly
from fake_backends.deployment.options import DeploymentOptions
from fake_backends.deployment.serving import CoalescingTransport
from fake_backends.encoding.json_text import dumps
from fake_backends.encoding.sse_frames import frame
from fake_backends.frontend.app import GenerationFirst
from fake_backends.frontend.flow import STREAM_TOKEN_BURST, unless_disconnected
from fake_backends.frontend.render.chat import _ChatChunks, chat_views
from fake_backends.frontend.render.completions import _CompletionChunks, completion_views
from fake_backends.frontend.requests import parse_chat_request, parse_completion_request
from fake_backends.frontend.runs import Received, run_request
from fake_backends.frontend.views import interleave
from fake_backends.model.decoding import (
    SamplingParams,
    _any_choice,
    _greedy_choice,
    generate_choice,
)
from fake_backends.model.tokenizer import EOS_ID, FIRST_BYTE_ID, FIRST_PIECE_ID, encode, pieces
from fake_backends.model.toy_model import ToyModel
from fake_backends.runtime.scheduler import UNDELAYED_TOKENS_PER_YIELD, Generation, WorkerRuntime


def _plain_greedy(model: ToyModel, prompt: list[int], params: SamplingParams) -> list[Any]:
    """Token, logprob and rank of each step, from the whole `Distribution` every step."""
    context = model.context(prompt)
    out = []
    for generated in range(params.max_tokens):
        dist = model.distribution(context, generated, include_eos=not params.ignore_eos)
        token = dist.argmax()
        out.append((token, dist.logprob(token), dist.rank(token)))
        context.append(token)
        if token == EOS_ID and not params.ignore_eos:
            break
    return out


@pytest.mark.parametrize("ignore_eos", [True, False])
@pytest.mark.parametrize("weights", ["initial", "step-3"])
def test_greedy_fast_path_matches_the_distribution(ignore_eos: bool, weights: str) -> None:
    model = ToyModel(weights)
    params = SamplingParams(max_tokens=40, ignore_eos=ignore_eos)
    for n in range(12):
        prompt = encode(f"prompt {n}: the quick brown fox")
        fast = generate_choice(model, prompt, params, 0)
        assert [(s.token_id, s.logprob, s.rank) for s in fast.steps] == _plain_greedy(
            model, prompt, params
        )
        assert all(s.top == () and math.isfinite(s.logprob) for s in fast.steps)


def test_a_remembered_greedy_choice_is_the_one_computed_for_its_weights_and_prompt() -> None:
    """Asked again, a greedy choice is the one computed the first time; other weights, another
    prompt or other parameters are computed afresh (never another key's choice)."""
    prompt = encode("a prompt sent again and again")
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    first = generate_choice(ToyModel("initial"), prompt, params, 0)
    assert generate_choice(ToyModel("initial"), list(prompt), params, 0) is first
    assert first == _greedy_choice(ToyModel("initial"), prompt, params, 0)
    for model, other_prompt, other_params in (
        (ToyModel("step-1"), prompt, params),
        (ToyModel("initial"), [*prompt, 7], params),
        (ToyModel("initial"), prompt, SamplingParams(max_tokens=25, ignore_eos=True)),
        (ToyModel("initial"), prompt, SamplingParams(max_tokens=24)),
    ):
        again = generate_choice(model, other_prompt, other_params, 0)
        assert again == _greedy_choice(model, other_prompt, other_params, 0)
        assert again is not first


@pytest.mark.parametrize("ignore_eos", [True, False])
@pytest.mark.parametrize("max_tokens", [0, 1, 5, 40])
def test_greedy_choice_is_the_general_loops_choice(ignore_eos: bool, max_tokens: int) -> None:
    """The greedy loop against the loop for any parameters, EOS and stop-id endings included."""
    model = ToyModel()
    for n in range(8):
        prompt = encode(f"prompt {n}: the quick brown fox")
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos)
        plain = _any_choice(model, prompt, params, 0)
        stop_at = plain.token_ids[len(plain.token_ids) // 2 :][:1]
        for stops in ((), tuple(stop_at)):
            params = SamplingParams(
                max_tokens=max_tokens, ignore_eos=ignore_eos, stop_token_ids=stops
            )
            assert _greedy_choice(model, prompt, params, n) == _any_choice(model, prompt, params, n)
            assert generate_choice(model, prompt, params, n) == _any_choice(
                model, prompt, params, n
            )


def test_greedy_step_is_the_distributions_argmax_including_ties_and_moved_ids() -> None:
    """Ordinary contexts, and the rare ones searched for: two candidates sharing the top logit
    (the lower id wins) and a top candidate whose id an earlier candidate took (moved up)."""
    model = ToyModel()
    chosen: dict[str, list[tuple[Any, int, bool]]] = {"ordinary": [], "tie": [], "moved": []}
    for n in range(400_000):
        context = model.context([FIRST_PIECE_ID + n % 1000, n // 1000])
        generated, include_eos = n % 24, n % 3 != 0
        fields = struct.unpack_from("<8I8H", context.digest())
        scales = list(fields[8:])
        top = max(scales)
        position = scales.index(top)
        raws = [value % (len(pieces())) for value in fields[:8]]
        if scales.count(top) > 1:
            kind = "tie"
        elif raws[position] in raws[:position]:
            kind = "moved"
        else:
            kind = "ordinary"
        if len(chosen[kind]) < 500:
            chosen[kind].append((context, generated, include_eos))
        if all(len(found) >= 3 for found in chosen.values()) and n > 2000:
            break
    assert all(len(found) >= 3 for found in chosen.values()), {k: len(v) for k, v in chosen.items()}
    for context, generated, include_eos in (c for found in chosen.values() for c in found):
        dist = model.distribution(context, generated, include_eos=include_eos)
        token = dist.argmax()
        assert model.greedy(context, generated, include_eos=include_eos) == (
            token,
            dist.prob(token),
        )


@functools.cache
def _pieces_by_bytes() -> dict[bytes, int]:
    return {p.encode("ascii"): FIRST_PIECE_ID + i for i, p in enumerate(pieces())}


def _plain_encode(text: str) -> list[int]:
    """Greedy longest match over every length, longest first: the encoder's definition."""
    table = _pieces_by_bytes()
    longest = max(len(p) for p in pieces())
    data, out, i = text.encode("utf-8"), [], 0
    while i < len(data):
        for length in range(min(longest, len(data) - i), 1, -1):
            if data[i : i + length] in table:
                out.append(table[data[i : i + length]])
                i += length
                break
        else:
            out.append(FIRST_BYTE_ID + data[i])
            i += 1
    return out


def test_encode_is_the_plain_longest_match() -> None:
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz     .,!?:;-\n0123456789éü中"
    words = pieces()
    for _ in range(300):
        text = "".join(
            rng.choice(words) + (rng.choice(alphabet) if rng.random() < 0.3 else "")
            for _ in range(rng.randrange(0, 8))
        ) + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
        assert encode(text) == _plain_encode(text)


class _Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_coalescing_transport_sends_one_turn_of_writes_at_once() -> None:
    async def scenario() -> list[list[bytes]]:
        raw = _Transport()
        transport = CoalescingTransport(raw)  # type: ignore[arg-type]
        seen = []
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"body")
        seen.append(list(raw.sent))  # nothing left yet
        await asyncio.sleep(0)
        seen.append(list(raw.sent))  # head and body, in one send
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")  # a head alone waits one more turn...
        await asyncio.sleep(0)
        seen.append(list(raw.sent))
        transport.write(b"first event")  # ...for the first body bytes
        await asyncio.sleep(0)
        seen.append(list(raw.sent))
        transport.write(b"last")
        transport.close()  # close sends what is pending first
        seen.append(list(raw.sent))
        assert transport.get_extra_info("peername") == "info:peername"
        return seen

    empty, first, held, second, last = asyncio.run(scenario())
    assert empty == []
    assert first == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    assert held == first
    assert second == [*first, b"HTTP/1.1 200 OK\r\n\r\nfirst event"]
    assert last == [*second, b"last"]


def test_coalescing_transport_sends_a_lone_head_before_closing() -> None:
    async def scenario() -> _Transport:
        raw = _Transport()
        transport = CoalescingTransport(raw)  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        transport.close()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return raw

    raw = asyncio.run(scenario())
    assert raw.sent == [b"HTTP/1.1 204 No Content\r\n\r\n"] and raw.closed


def test_coalescing_transport_drops_writes_to_a_lost_connection() -> None:
    async def scenario() -> list[bytes]:
        raw = _Transport()
        transport = CoalescingTransport(raw)  # type: ignore[arg-type]
        transport.write(b"data: x\n\n")
        raw.closed = True
        await asyncio.sleep(0)
        return raw.sent

    assert asyncio.run(scenario()) == []


def _receive(disconnect: asyncio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI ``receive`` whose only message is the client's disconnect."""

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    return receive


def test_unless_disconnected_cancels_the_work_when_the_client_leaves() -> None:
    async def scenario() -> tuple[Any, Any, bool]:
        gone = asyncio.Event()
        cancelled = asyncio.Event()

        async def work(release: asyncio.Event) -> str:
            try:
                await release.wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "done"

        finished = asyncio.Event()
        finished.set()
        completed = await unless_disconnected(_receive(gone), work(finished), ignore=False)
        asyncio.get_running_loop().call_later(0.01, gone.set)
        left = await unless_disconnected(_receive(gone), work(asyncio.Event()), ignore=False)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        return completed, left, cancelled.is_set()

    assert asyncio.run(scenario()) == ("done", None, True)


def test_unless_disconnected_lets_an_outside_cancellation_through() -> None:
    async def scenario() -> None:
        never = asyncio.Event()
        task = asyncio.ensure_future(
            unless_disconnected(_receive(never), never.wait(), ignore=False)
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def _json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and the infinities included: the fake writes them bare
    | st.text(),
    _json_containers,
    max_leaves=20,
)


@given(_JSON_VALUES)
def test_dumps_writes_what_json_dumps_writes_with_the_frontends_options(value: Any) -> None:
    assert dumps(value) == json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, allow_nan=True
    )


def _finishes_at_once(coroutine: Any) -> tuple[bool, Any]:
    """Run a coroutine one step: (True, its result) when it ended without waiting."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return True, done.value
    coroutine.close()
    return False, None


@pytest.mark.parametrize("tokens", [0, 1, 3, 4, 5])
@pytest.mark.parametrize("delay_s", [0.0, 0.004])
@pytest.mark.parametrize("state", ["running", "paused", "aborted", "closing"])
def test_release_now_is_next_token_when_that_would_not_wait(
    tokens: int, delay_s: float, state: str
) -> None:
    """`release_now` releases only when `next_token` would finish without giving the event loop
    a turn, with the same effect (and, running undelayed between yields, does release);
    otherwise it changes nothing."""

    def make() -> tuple[WorkerRuntime, Generation]:
        runtime = WorkerRuntime()
        if state == "paused":  # paused keeping requests in flight: they freeze between tokens
            runtime.paused, runtime.pause_mode = True, "keep"
        runtime.closing = state == "closing"
        gen = Generation("attempt", "cmpl-1", admitted=True, tokens=tokens)
        gen.abort_requested = state == "aborted"
        return runtime, gen

    async def scenario() -> None:
        runtime, gen = make()
        released = runtime.release_now(gen, delay_s)
        reference_runtime, reference = make()
        at_once, result = _finishes_at_once(reference_runtime.next_token(reference, delay_s))
        if released:
            assert at_once and result is True and gen.tokens == reference.tokens == tokens + 1
        else:
            assert gen.tokens == tokens
        if state == "running" and delay_s == 0 and tokens % 4:
            assert released

    asyncio.run(scenario())


@pytest.mark.parametrize("burst", [UNDELAYED_TOKENS_PER_YIELD, STREAM_TOKEN_BURST])
def test_a_paced_streams_burst_leaves_between_two_turns_of_the_loop(burst: int) -> None:
    """A paced stream's delay before each burst is its turn of the event loop: every other token
    of the burst is released at once (`yield_every`); a pause stops the burst at the next token."""
    runtime = WorkerRuntime()
    gen = Generation("attempt", "cmpl-1", admitted=True, tokens=1)
    released = 0
    while runtime.release_now(gen, 0.0, burst):
        released += 1
    assert released == burst - 1 and gen.tokens == burst
    gen = Generation("attempt", "cmpl-2", admitted=True, tokens=1)
    assert runtime.release_now(gen, 0.0, burst)
    runtime.paused, runtime.pause_mode = True, "keep"
    assert not runtime.release_now(gen, 0.0, burst) and gen.tokens == 2


_TOKEN_FRAME_BODIES: dict[str, list[dict[str, Any]]] = {
    "completions": [
        {"prompt": "the quick brown fox", "max_tokens": 6},
        {"prompt": "the quick brown fox", "max_tokens": 5, "n": 2, "seed": 3, "temperature": 1},
        {"prompt": "the quick brown fox", "max_tokens": 4, "logprobs": 2},
        {
            "prompt": "the quick brown fox",
            "max_tokens": 4,
            "nvext": {"extra_fields": ["completion_token_ids", "worker_id"]},
        },
        {"prompt": "the fox", "max_tokens": 4, "nvext": {"extra_fields": ["engine_data"]}},
    ],
    "chat": [
        {"messages": [{"role": "user", "content": "hi \u00e9\n"}], "max_tokens": 6},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "n": 2, "seed": 3,
         "temperature": 1},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "logprobs": True,
         "top_logprobs": 2},
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
         "nvext": {"extra_fields": ["completion_token_ids"]}},
    ],
}  # fmt: skip


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
@pytest.mark.parametrize("faults", [(), ("stream_ids_differ", "completion_ids_retokenized")])
@pytest.mark.parametrize("switch_model_fault", [False, True])
def test_token_frames_are_the_token_chunks_framed(
    endpoint: str, faults: tuple[str, ...], switch_model_fault: bool
) -> None:
    """A token's frame is its chunk written as a frame, byte for byte, whichever way it is
    written (from a text template or the whole chunk), and a fault switched on mid-stream
    shows in the next frame."""
    assembly = Assembly(DeploymentOptions.build("vllm", workers=1), faults=faults)
    try:
        state = assembly.state
        used_templates = 0
        for body in _TOKEN_FRAME_BODIES[endpoint]:
            state.faults.set(faults)
            body = {"model": state.model_name, "stream": True, **body}
            if endpoint == "completions":
                parsed = parse_completion_request(body)
                run = run_request(state, parsed, state.workers[0], Received.now(), "cmpl-1")
                views: list[Any] = completion_views(state, run)
                chunks: Any = _CompletionChunks(state, run)
            else:
                parsed = parse_chat_request(body)
                run = run_request(state, parsed, state.workers[0], Received.now(), "chatcmpl-1")
                views = chat_views(state, run)
                chunks = _ChatChunks(state, run)
            for turn, (view, position) in enumerate(interleave(views)):
                if switch_model_fault and turn == 2:
                    state.faults.set([*faults, "model_identity_mismatch"])
                terminal = position == len(view.result.steps) - 1
                written = chunks.token_frame(view, position, terminal=terminal)
                assert written == frame(chunks.token_chunk(view, position, terminal=terminal))
                if switch_model_fault and turn >= 2:
                    assert b'"model":"other-model"' in written
            used_templates += len(chunks._text_frames._templates)
        assert used_templates > 0  # the template path was taken, not only the whole chunks
    finally:
        assembly.group.close_sockets()


def test_generation_first_answers_a_bug_with_500_and_routes_the_rest() -> None:
    """A generation handler that fails unexpectedly answers 500 in Dynamo's flat error shape
    and the exception still reaches the server (which logs it); any other request, a GET on a
    generation path included, goes through the router."""

    async def broken(request: Any) -> Any:
        raise RuntimeError("a bug in the fake")

    routed: list[tuple[str, str]] = []

    async def others(scope: Any, receive: Any, send: Any) -> None:
        routed.append((scope["method"], scope["path"]))

    app = GenerationFirst({"/v1/completions": broken}, others)

    def call(method: str, path: str) -> tuple[list[dict[str, Any]], BaseException | None]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": method, "path": path, "headers": []}
        try:
            asyncio.run(app(scope, receive, send))
        except RuntimeError as exc:
            return sent, exc
        return sent, None

    sent, raised = call("POST", "/v1/completions")
    assert str(raised) == "a bug in the fake"
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"]) == {
        "message": "Internal server error",
        "type": "Internal Server Error",
        "code": 500,
    }
    assert call("GET", "/v1/completions") == ([], None)
    assert call("POST", "/v1/models") == ([], None)
    assert routed == [("GET", "/v1/completions"), ("POST", "/v1/models")]
