"""The preprocessed request Dynamo's frontend sends a worker (CONTRACT-NOTES §O4.1), parsed into
what the toy engine needs: prompt ids, sampling, stop conditions, logprob options, and the
native SGLang body when the request came through ``POST /generate``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fake_backends.model.decoding import DEFAULT_MAX_TOKENS
from fake_backends.model.tokenizer import EOS_ID

Json = dict[str, Any]


class RequestContext(Protocol):
    """The part of Dynamo's ``Context`` the engine uses (duck-typed for tests)."""

    def id(self) -> str: ...

    def is_stopped(self) -> bool: ...


def int_or(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _ids(value: Any) -> frozenset[int]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if int_or(v, None) is not None)


def _section(request: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = request.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class ParsedRequest:
    """The preprocessed request, reduced to what the toy needs."""

    prompt: tuple[int, ...]
    n: int
    max_tokens: int
    min_tokens: int
    temperature: float | None
    seed: int | None
    ignore_eos: bool
    eos_ids: frozenset[int]
    end_ids: frozenset[int]
    logprobs: int | None
    prompt_logprobs: int | None
    extra_fields: frozenset[str]
    sglang: Mapping[str, Any] | None
    cached_tokens: int = 0
    """Prompt tokens this worker's prefix cache held when the request arrived."""

    @property
    def greedy(self) -> bool:
        return self.temperature is None or self.temperature == 0


def parse_request(request: Mapping[str, Any]) -> ParsedRequest:
    """Read the fields the frontend fills (CONTRACT-NOTES §O4.1); anything absent gets a default."""
    stop = _section(request, "stop_conditions")
    sampling = _section(request, "sampling_options")
    output = _section(request, "output_options")
    extra = _section(request, "extra_args")
    nvext = extra.get("nvext") if isinstance(extra.get("nvext"), Mapping) else {}
    fields = nvext.get("extra_fields") if isinstance(nvext, Mapping) else None
    sglang = extra.get("sglang_tito")
    prompt = tuple(t for t in request.get("token_ids") or [] if int_or(t, None) is not None)
    temperature = sampling.get("temperature")
    ignore_eos = stop.get("ignore_eos") is True
    eos_ids = _ids(request.get("eos_token_ids")) | {EOS_ID}
    # Like vLLM, the engine knows its own EOS: the vLLM-native route sends neither
    # eos_token_ids nor stop_token_ids_hidden, yet generation must still end at EOS.
    end_ids = (
        _ids(stop.get("stop_token_ids_hidden"))
        | _ids(stop.get("stop_token_ids_visible"))
        | _ids(stop.get("stop_token_ids"))
        | (frozenset() if ignore_eos else eos_ids)
    )
    if isinstance(sglang, Mapping):
        return _parse_sglang(prompt, sglang, stop)
    return ParsedRequest(
        prompt=prompt,
        n=max(1, int_or(sampling.get("n"), 1) or 1),
        max_tokens=max(1, int_or(stop.get("max_tokens"), DEFAULT_MAX_TOKENS) or 1),
        min_tokens=max(0, int_or(stop.get("min_tokens"), 0) or 0),
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        seed=int_or(sampling.get("seed"), None),
        ignore_eos=ignore_eos,
        eos_ids=eos_ids,
        end_ids=end_ids,
        logprobs=int_or(output.get("logprobs"), None),
        prompt_logprobs=int_or(output.get("prompt_logprobs"), None),
        extra_fields=frozenset(f for f in fields or [] if isinstance(f, str))
        if isinstance(fields, list)
        else frozenset(),
        sglang=None,
    )


def _parse_sglang(
    prompt: tuple[int, ...], body: Mapping[str, Any], stop: Mapping[str, Any]
) -> ParsedRequest:
    """SGLang's own sampling parameters; SGLang stops at the model's EOS unless told not to."""
    params = body.get("sampling_params")
    params = params if isinstance(params, Mapping) else {}
    temperature = params.get("temperature")
    ignore_eos = params.get("ignore_eos") is True
    max_new = int_or(params.get("max_new_tokens"), None)
    if max_new is None:
        max_new = int_or(stop.get("max_tokens"), DEFAULT_MAX_TOKENS)
    top_n = int_or(body.get("top_logprobs_num"), 0) or 0
    return ParsedRequest(
        prompt=prompt,
        n=1,
        max_tokens=max(1, max_new or DEFAULT_MAX_TOKENS),
        min_tokens=max(0, int_or(params.get("min_new_tokens"), 0) or 0),
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        seed=int_or(params.get("sampling_seed"), None),
        ignore_eos=ignore_eos,
        eos_ids=frozenset({EOS_ID}),
        end_ids=_ids(params.get("stop_token_ids")) | (frozenset() if ignore_eos else {EOS_ID}),
        logprobs=top_n if body.get("return_logprob") is True else None,
        prompt_logprobs=None,
        extra_fields=frozenset(),
        sglang=body,
    )
