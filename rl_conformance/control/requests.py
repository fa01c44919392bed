"""Request builders the suites share. The run's hypothesis settings (examples, shrinking, seed)
are a profile the plugin loads, so the suites need none of their own."""

from __future__ import annotations

from typing import Any

from ..client.http import Client
from ..model.target import Target
from ..wire.exchange import Exchange
from ..wire.stream_state import sglang_terminals


def completion(
    client: Client,
    target: Target,
    prompt: Any,
    *,
    stream: bool = False,
    extra_fields: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> Exchange:
    body: dict[str, Any] = {"model": target.model, "prompt": prompt, **fields}
    if extra_fields:
        body["nvext"] = {**body.get("nvext", {}), "extra_fields": list(extra_fields)}
    if stream:
        body["stream"] = True
        return client.stream("POST", target.url("/v1/completions"), json_body=body, headers=headers)
    return client.post(target.url("/v1/completions"), body, headers=headers)


def chat(
    client: Client,
    target: Target,
    *,
    token_data: list[int] | None = None,
    content: str = "hello",
    stream: bool = False,
    extra_fields: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> Exchange:
    nvext: dict[str, Any] = dict(fields.pop("nvext", None) or {})
    body: dict[str, Any] = {
        "model": target.model,
        "messages": [{"role": "user", "content": content}],
        **fields,
    }
    if token_data is not None:
        nvext["token_data"] = token_data
    if extra_fields:
        nvext["extra_fields"] = list(extra_fields)
    if nvext:
        body["nvext"] = nvext
    if stream:
        body["stream"] = True
        return client.stream(
            "POST", target.url("/v1/chat/completions"), json_body=body, headers=headers
        )
    return client.post(target.url("/v1/chat/completions"), body, headers=headers)


def sglang_generate(
    client: Client, target: Target, input_ids: list[int], **fields: Any
) -> Exchange:
    body = {"input_ids": input_ids, "stream": True, **fields}
    return client.stream("POST", target.url("/generate"), json_body=body, detector=sglang_terminals)
