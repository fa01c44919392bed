"""Helpers the suites share: request builders and the run's hypothesis settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, seed, settings

from .client import Client
from .stream_state import sglang_terminals
from .target import Target
from .wire import Exchange

F = TypeVar("F", bound=Callable[..., Any])

_RUN = {"examples": 8, "seed": 0, "shrink": 1}


def configure(examples: int, run_seed: int | None, shrink: bool = True) -> None:
    """Called by the plugin before the suites are imported."""
    _RUN["examples"] = examples
    _RUN["seed"] = run_seed or 0
    _RUN["shrink"] = int(shrink)


def property_test(test: F) -> F:
    """Hypothesis settings for tests that talk to a live deployment: bounded examples, no
    per-example deadline (the client enforces its own), no example database, the run's seed."""
    phases = list(Phase) if _RUN["shrink"] else [Phase.explicit, Phase.reuse, Phase.generate]
    configured = settings(
        phases=phases,
        max_examples=_RUN["examples"],
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )(test)
    return seed(_RUN["seed"])(configured)


def completion(
    client: Client,
    target: Target,
    prompt: Any,
    *,
    stream: bool = False,
    extra_fields: tuple[str, ...] = (),
    **fields: Any,
) -> Exchange:
    body: dict[str, Any] = {"model": target.model, "prompt": prompt, **fields}
    if extra_fields:
        body["nvext"] = {**body.get("nvext", {}), "extra_fields": list(extra_fields)}
    if stream:
        body["stream"] = True
        return client.stream("POST", target.url("/v1/completions"), json_body=body)
    return client.post(target.url("/v1/completions"), body)


def chat(
    client: Client,
    target: Target,
    *,
    token_data: list[int] | None = None,
    content: str = "hello",
    stream: bool = False,
    extra_fields: tuple[str, ...] = (),
    **fields: Any,
) -> Exchange:
    body: dict[str, Any] = {
        "model": target.model,
        "messages": [{"role": "user", "content": content}],
        **fields,
    }
    nvext: dict[str, Any] = {}
    if token_data is not None:
        nvext["token_data"] = token_data
    if extra_fields:
        nvext["extra_fields"] = list(extra_fields)
    if nvext:
        body["nvext"] = nvext
    if stream:
        body["stream"] = True
        return client.stream("POST", target.url("/v1/chat/completions"), json_body=body)
    return client.post(target.url("/v1/chat/completions"), body)


def sglang_generate(
    client: Client, target: Target, input_ids: list[int], **fields: Any
) -> Exchange:
    body = {"input_ids": input_ids, "stream": True, **fields}
    return client.stream("POST", target.url("/generate"), json_body=body, detector=sglang_terminals)
