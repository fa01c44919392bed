"""Faithful hand-made observations; each test breaks exactly one rule of one of them."""

from __future__ import annotations

import copy
from typing import Any

from rl_conformance.checks.pause_modes import Crossing, Generated

PROMPT = [901, 445, 1203]
IDS = [3067, 3247, 2]


def completion() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 1,
            "model": "toy",
            "choices": [
                {
                    "index": 0,
                    "text": "gezi ba",
                    "finish_reason": "stop",
                    "logprobs": {
                        "tokens": ["gezi", " ba", ""],
                        "token_logprobs": [-1.12, -0.5, -0.2],
                        "top_logprobs": [
                            {"gezi": -1.12, "xo": -1.5},
                            {" ba": -0.5, "q": -2.0},
                            {"": -0.2, "z": -3.0},
                        ],
                        "text_offset": [],
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
            "nvext": {
                "completion_token_ids": IDS,
                "prompt_token_ids": PROMPT,
                "engine_data": {"completion_logprobs": [-1.12, -0.5, -0.2]},
            },
        }
    )


def chat() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "toy",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "gezi ba"},
                    "logprobs": {
                        "content": [
                            {
                                "token": "gezi",
                                "logprob": -1.12,
                                "token_id": 3067,
                                "bytes": [103],
                                "top_logprobs": [
                                    {"token": "gezi", "logprob": -1.12, "bytes": [103]},
                                    {"token": "xo", "logprob": -1.5, "bytes": [120]},
                                ],
                            },
                            {
                                "token": " ba",
                                "logprob": -0.5,
                                "token_id": 3247,
                                "bytes": [32],
                                "top_logprobs": [{"token": " ba", "logprob": -0.5, "bytes": [32]}],
                            },
                            {
                                "token": "",
                                "logprob": -0.2,
                                "token_id": 2,
                                "bytes": [],
                                "top_logprobs": [{"token": "", "logprob": -0.2, "bytes": []}],
                            },
                        ]
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
            "nvext": {"completion_token_ids": IDS},
        }
    )


def prompt_logprobs() -> list[Any]:
    return [
        None,
        {
            "445": {"logprob": -3.1, "rank": 7, "decoded_token": "x"},
            "9": {"logprob": -0.2, "rank": 1, "decoded_token": "y"},
        },
        {"1203": {"logprob": -0.4, "rank": 1, "decoded_token": "z"}},
    ]


def discovery() -> dict[str, Any]:
    worker = {
        "namespace": "dynamo",
        "component": "backend",
        "endpoint": "rl",
        "instance_id": 7587886443219045121,
        "transport": {"tcp": "127.0.0.1:1/ab/dynamo"},
        "request_plane_url": "dyn://dynamo.backend.rl",
        "system_url": "http://127.0.0.1:2",
        "model": "toy",
        "routes": ["flush_cache", "get_weight_version", "liveness_probe"],
        "world_size": 1,
    }
    second = dict(worker, instance_id=12661255104908017940, system_url="http://127.0.0.1:3")
    return copy.deepcopy(
        {"protocol_version": 1, "namespace": "dynamo", "workers": [worker, second]}
    )


def stream() -> list[Any]:
    return [
        {
            "choices": [{"index": 0, "text": "gezi", "finish_reason": None}],
            "nvext": {"completion_token_ids": [3067]},
        },
        {
            "choices": [{"index": 0, "text": " ba", "finish_reason": None}],
            "nvext": {"completion_token_ids": [3247]},
        },
        {
            "choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
            "nvext": {"completion_token_ids": [2]},
        },
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}},
        "[DONE]",
    ]


def sglang_final() -> dict[str, Any]:
    return {
        "text": "ab",
        "output_ids": [10, 11],
        "meta_info": {
            "id": "r",
            "finish_reason": {"type": "length", "length": 2},
            "prompt_tokens": 3,
            "completion_tokens": 2,
            "input_token_logprobs": [[None, 901, None], [-3.1, 445, None], [-0.4, 1203, None]],
            "output_token_logprobs": [[-0.5, 10, None], [-1.2, 11, None]],
        },
    }


def json_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (keys and indexes), the root first."""
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += json_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += json_paths(value, (*path, index))
    return found


def held_crossing(while_held: int) -> Crossing:
    """A 300-token stream a keep pause held at 30 tokens and that ran to its length after the
    resume; `while_held`: tokens its worker generated while paused, by its own counters."""
    return Crossing(
        "keep",
        300,
        20,
        30,
        False,
        30,
        False,
        300,
        True,
        1,
        generated=Generated("generated tokens", 0, 30, 30, 30 + while_held, 300),
    )
