"""Folding a stream of chunks into the shape of a unary response, as Dynamo's own merge does:
text and logprob arrays concatenate per choice, `nvext.completion_token_ids` concatenates, every
other nvext key takes the last chunk's value. Pure; used by checks and by runtime guards."""

from __future__ import annotations

from typing import Any

DONE = "[DONE]"


def aggregate_stream(payloads: list[Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {"choices": []}
    choices: dict[int, dict[str, Any]] = {}
    nvext: dict[str, Any] = {}
    for payload in payloads:
        if not isinstance(payload, dict):
            continue
        for key in ("id", "object", "model", "created"):
            if key in payload and key not in merged:
                merged[key] = payload[key]
        if isinstance(payload.get("usage"), dict):
            merged["usage"] = payload["usage"]
        if "prompt_logprobs" in payload:
            merged["prompt_logprobs"] = payload["prompt_logprobs"]
        chunk_nvext = payload.get("nvext")
        if isinstance(chunk_nvext, dict):
            for key, value in chunk_nvext.items():
                if key == "completion_token_ids" and isinstance(value, list):
                    nvext.setdefault(key, []).extend(value)
                else:
                    nvext[key] = value
        for position, choice in enumerate(payload.get("choices") or []):
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", position)
            target = choices.setdefault(index, {"index": index, "finish_reason": None})
            _merge_choice(target, choice)
    merged["choices"] = [choices[index] for index in sorted(choices, key=str)]
    if nvext:
        merged["nvext"] = nvext
    return merged


def _merge_choice(target: dict[str, Any], choice: dict[str, Any]) -> None:
    if choice.get("finish_reason") is not None:
        target["finish_reason"] = choice["finish_reason"]
    if "text" in choice:
        target["text"] = target.get("text", "") + (choice.get("text") or "")
    delta = choice.get("delta")
    if isinstance(delta, dict):
        message = target.setdefault("message", {"role": "assistant", "content": ""})
        if isinstance(delta.get("role"), str):
            message["role"] = delta["role"]
        if isinstance(delta.get("content"), str):
            message["content"] = (message.get("content") or "") + delta["content"]
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return
    merged = target.get("logprobs")
    if not isinstance(merged, dict):
        merged = {}
        target["logprobs"] = merged
    for key, value in logprobs.items():
        if isinstance(value, list):
            merged.setdefault(key, []).extend(value)
        elif key not in merged:
            merged[key] = value
