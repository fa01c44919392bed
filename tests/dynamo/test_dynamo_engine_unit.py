"""``fake_backends.dynamo.engine`` on its own (no Dynamo needed): generation, pause modes and
admin replies, so the engine's semantics are pinned even where ``.venv-dynamo`` is missing.

The engine is driven exactly as Dynamo drives it: ``generate(request, context)`` with a
preprocessed request dict, and the admin handlers with a body dict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from fake_backends.dynamo.engine import SCRIPT_PREFIX, ToyEngine
from fake_backends.dynamo.requests import parse_request
from fake_backends.faults.catalogue import UnknownFaultError
from fake_backends.faults.engine import ADMIN, ENGINE_FAULT_NAMES, ENGINE_FAULTS, engine_faults
from fake_backends.model.decoding import SamplingParams, generate_choice, score_prompt
from fake_backends.model.tokenizer import EOS_ID
from fake_backends.model.toy_model import ToyModel

T = TypeVar("T")
PROMPT = [316, 276, 330, 275]
NOT_PAUSED = (
    "Worker must be paused via pause_generation() before updating weights. Call "
    "pause_generation() first, then update, then resume_generation()."
)


class Ctx:
    """Stands in for Dynamo's ``Context``."""

    def __init__(self, request_id: str = "req-1") -> None:
        self.request_id = request_id
        self.stopped = False

    def id(self) -> str:
        return self.request_id

    def is_stopped(self) -> bool:
        return self.stopped


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def request(**over: Any) -> dict[str, Any]:
    """A preprocessed request as the 1.6.1 frontend sends it for /v1/completions."""
    body: dict[str, Any] = {
        "model": "toy",
        "token_ids": PROMPT,
        "eos_token_ids": [EOS_ID],
        "stop_conditions": {
            "max_tokens": 6,
            "stop_token_ids_hidden": [EOS_ID],
            "ignore_eos": None,
            "min_tokens": None,
        },
        "sampling_options": {"n": None, "temperature": 0.0, "seed": None},
        "output_options": {"logprobs": None, "prompt_logprobs": None},
        "extra_args": {},
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


async def collect(engine: ToyEngine, body: dict[str, Any], ctx: Ctx | None = None) -> list[Any]:
    return [chunk async for chunk in engine.generate(body, ctx or Ctx())]


def ids_of(chunks: list[dict[str, Any]], index: int = 0) -> list[int]:
    return [t for c in chunks if c.get("index", 0) == index for t in c["token_ids"]]


def test_parse_defaults() -> None:
    parsed = parse_request({"token_ids": [5], "stop_conditions": {"max_tokens": None}})
    assert (parsed.max_tokens, parsed.n, parsed.greedy, parsed.logprobs) == (16, 1, True, None)
    assert EOS_ID in parsed.end_ids  # the engine knows its own EOS (vLLM route sends none)
    ignoring = parse_request({"token_ids": [5], "stop_conditions": {"ignore_eos": True}})
    assert EOS_ID not in ignoring.end_ids


def test_greedy_generation_matches_fake_backends_generation() -> None:
    chunks = run(collect(ToyEngine(), request(output_options={"logprobs": 2})))
    expected = generate_choice(ToyModel("initial"), PROMPT, SamplingParams(6, 0, top_k=2), 0)
    assert ids_of(chunks) == expected.token_ids
    assert [c["log_probs"][0] for c in chunks] == expected.logprobs
    assert all(len(c["token_ids"]) == 1 for c in chunks)
    entry = chunks[0]["top_logprobs"][0][0]
    assert set(entry) == {"rank", "token_id", "token", "logprob", "bytes"}
    assert entry["token"] is None and entry["rank"] == 1
    final = chunks[-1]
    assert final["finish_reason"] == "length"
    assert final["completion_usage"]["prompt_tokens"] == 4
    assert "engine_data" not in final  # nothing asked for


def test_seeded_n2_matches_per_choice_seeds() -> None:
    body = request(
        sampling_options={"n": 2, "temperature": 1.0, "seed": 9},
        stop_conditions={"ignore_eos": True, "stop_token_ids_hidden": None},
    )
    chunks = run(collect(ToyEngine(), body))
    for index in (0, 1):
        params = SamplingParams(6, 1.0, seed=9, ignore_eos=True)
        assert ids_of(chunks, index) == generate_choice(ToyModel(), PROMPT, params, index).token_ids
    assert [c["index"] for c in chunks[:4]] == [0, 1, 0, 1]  # interleaved


def test_script_prompt_replays_ids_and_eos_finishes() -> None:
    chunks = run(collect(ToyEngine(), request(token_ids=[*SCRIPT_PREFIX, 300, 7, EOS_ID, 301])))
    assert ids_of(chunks) == [300, 7, EOS_ID]
    assert (chunks[-1]["finish_reason"], chunks[-1]["stop_reason"]) == ("eos", EOS_ID)


def test_sampled_token_outside_top_k_is_listed_first() -> None:
    body = request(token_ids=[*SCRIPT_PREFIX, 300], output_options={"logprobs": 2})
    (chunk,) = run(collect(ToyEngine(), body))
    tops = chunk["top_logprobs"][0]
    assert tops[0]["token_id"] == 300 and tops[0]["rank"] > 2 and len(tops) == 3


def test_prompt_logprobs_and_engine_data() -> None:
    body = request(
        output_options={"prompt_logprobs": 1, "logprobs": 0},
        extra_args={"nvext": {"extra_fields": ["engine_data"]}},
    )
    chunks = run(collect(ToyEngine(), body))
    data = chunks[-1]["engine_data"]
    scored = score_prompt(ToyModel(), PROMPT, 1)
    assert data["prompt_logprobs"][0] is None
    assert data["prompt_logprobs"][1][str(PROMPT[1])]["logprob"] == scored[1].logprob  # type: ignore[union-attr]
    assert all(isinstance(k, str) for p in data["prompt_logprobs"][1:] for k in p)
    assert data["completion_token_ids"] == ids_of(chunks)
    assert data["completion_logprobs"] == [c["log_probs"][0] for c in chunks]
    assert data["prompt_token_ids"] == PROMPT and data["weight_version"] is None


def test_sglang_native_objects_are_cumulative() -> None:
    body = request(
        extra_args={
            "sglang_tito": {
                "rid": "r",
                "return_logprob": True,
                "logprob_start_len": 0,
                "sampling_params": {"max_new_tokens": 3, "temperature": 0},
            }
        }
    )
    chunks = run(collect(ToyEngine(), body))
    responses = [c["engine_data"]["sglang_response"] for c in chunks]
    assert all(c["token_ids"] == [] for c in chunks)
    assert [len(r["output_ids"]) for r in responses] == [1, 2, 3]
    assert responses[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert responses[-1]["meta_info"]["input_token_logprobs"][0] == [None, PROMPT[0], None]


def test_context_stop_ends_the_stream_without_a_final_chunk() -> None:
    async def scenario() -> list[Any]:
        engine, ctx, out = ToyEngine(), Ctx(), []
        async for chunk in engine.generate(request(), ctx):
            out.append(chunk)
            ctx.stopped = True
        return out

    chunks = run(scenario())
    assert len(chunks) == 1 and "finish_reason" not in chunks[0]


def test_admin_replies_copy_vllm_handlers() -> None:
    async def scenario() -> None:
        engine = ToyEngine()
        assert await engine.admin_routes()["liveness_probe"](None) == {
            "status": "ok",
            "alive": True,
        }
        assert await engine.admin_routes()["liveness_probe"]([1]) == {
            "status": "error",
            "message": "request body must be a JSON object",
        }
        assert await engine.admin_routes()["update_weights_from_disk"]({"model_path": "/x"}) == {
            "status": "error",
            "message": NOT_PAUSED,
        }
        assert await engine.admin_routes()["update_weights_from_tensor"]({}) == {
            "status": "error",
            "message": "update_weights_from_tensor is not implemented",
        }
        assert (await engine.admin_routes()["pause_generation"]({"mode": "nope"}))[
            "status"
        ] == "error"
        await engine.admin_routes()["pause_generation"]({})
        assert await engine.admin_routes()["update_weights_from_disk"]({}) == {
            "status": "error",
            "message": "Missing 'model_path' in body",
        }
        assert await engine.admin_routes()["update_weights_from_distributed"]({}) == {
            "status": "error",
            "message": "no weight update group: call init_weights_update_group first",
        }
        assert await engine.admin_routes()["update_weights_from_disk"]({"model_path": "/x"}) == {
            "status": "ok",
            "version": "unknown",
            "version_declared": False,
        }
        assert engine.weights == "path:/x"
        assert await engine.admin_routes()["get_weight_version"]({}) == {
            "status": "ok",
            "version": None,
            "version_declared": False,
        }
        assert await engine.admin_routes()["set_weight_version"]({"weight_version": None}) == {
            "status": "ok",
            "version": None,
        }
        assert (await engine.admin_routes()["get_weight_version"]({}))["version_declared"] is True

    run(scenario())


def test_pause_keep_holds_then_update_applies_to_the_held_request() -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        engine = ToyEngine()
        await engine.admin_routes()["pause_generation"]({"mode": "keep"})
        task = asyncio.ensure_future(collect(engine, request()))
        await asyncio.sleep(0.1)
        assert not task.done() and engine.in_flight == 1
        await engine.admin_routes()["update_weights_from_disk"]({"model_path": "/ckpt"})
        await engine.admin_routes()["resume_generation"]({})
        held = ids_of(await task)
        return held, ids_of(await collect(engine, request()))

    held, fresh = run(scenario())
    assert held == fresh != ids_of(run(collect(ToyEngine(), request())))


@pytest.mark.parametrize("how", ["pause_abort", "abort_request", "shutdown"])
def test_held_request_ends_cancelled(how: str) -> None:
    async def scenario() -> list[Any]:
        engine = ToyEngine()
        await engine.admin_routes()["pause_generation"]({"mode": "keep"})
        task = asyncio.ensure_future(collect(engine, request(), Ctx("abc")))
        await asyncio.sleep(0.05)
        if how == "pause_abort":
            await engine.admin_routes()["pause_generation"]({"mode": "abort"})
        elif how == "abort_request":
            assert await engine.admin_routes()["abort_request"]({"request_id": "abc"}) == {
                "status": "ok",
                "request_id": "abc",
            }
        else:
            engine.shutdown()
        return await asyncio.wait_for(task, 2.0)

    (chunk,) = run(scenario())
    assert chunk["token_ids"] == [] and chunk["finish_reason"] == "cancelled"


def test_pause_wait_lets_started_requests_finish() -> None:
    async def scenario() -> None:
        engine = ToyEngine()
        started = asyncio.Event()
        out: list[Any] = []

        async def consume() -> None:
            async for chunk in engine.generate(
                request(stop_conditions={"max_tokens": 50, "ignore_eos": True}), Ctx("a")
            ):
                out.append(chunk)
                started.set()
                await asyncio.sleep(0.001)

        task = asyncio.ensure_future(consume())
        await started.wait()
        reply = await engine.admin_routes()["pause_generation"]({"mode": "wait"})
        assert reply["mode"] == "wait" and task.done() and len(ids_of(out)) == 50
        held = asyncio.ensure_future(collect(engine, request(), Ctx("b")))
        await asyncio.sleep(0.05)
        assert not held.done()
        await engine.admin_routes()["resume_generation"]({})
        assert len(ids_of(await held)) == 6

    run(scenario())


def test_unknown_engine_fault_names_are_refused() -> None:
    with pytest.raises(UnknownFaultError, match="valid engine faults are: "):
        engine_faults(["no_such_fault"])


@pytest.mark.parametrize(
    "name", [n for n in ENGINE_FAULT_NAMES if ADMIN not in ENGINE_FAULTS[n].applies_to]
)
def test_every_generation_fault_changes_what_the_engine_yields(name: str) -> None:
    body = request(
        output_options={"logprobs": 1, "prompt_logprobs": 1},
        extra_args={"nvext": {"extra_fields": ["engine_data"]}},
    )
    if name == "eos_as_stop":
        body["token_ids"] = [*SCRIPT_PREFIX, 300, EOS_ID]
    honest = run(collect(ToyEngine(), body))
    faulty = run(collect(ToyEngine(engine_faults([name])), body))
    again = run(collect(ToyEngine(engine_faults([name])), body))
    assert faulty != honest and faulty == again  # deviates, deterministically


def test_admin_faults() -> None:
    async def scenario() -> None:
        engine = ToyEngine(
            engine_faults(
                ["weight_version_unchanged", "update_keeps_old_weights", "pause_not_applied"]
            )
        )
        await engine.admin_routes()["pause_generation"]({"mode": "keep"})
        assert len(ids_of(await asyncio.wait_for(collect(engine, request()), 1.0))) == 6
        reply = await engine.admin_routes()["update_weights_from_disk"](
            {"model_path": "/x", "weight_version": "v"}
        )
        assert reply == {"status": "ok", "version": "v", "version_declared": True}
        assert engine.weights == "initial" and engine.reported_version() is None

    run(scenario())


def test_the_engine_serves_the_fake_deployments_vllm_route_table() -> None:
    """One control plane: the same routes, answered by the same code, on both workers."""
    from fake_backends.admin.routes import VLLM_RL_ROUTES

    assert sorted(ToyEngine().admin_routes()) == sorted(VLLM_RL_ROUTES)
