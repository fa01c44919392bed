"""Slime's streaming rollout through Dynamo's SGLang-native frontend, certified through a shim.

Dynamo's example `examples/rl/slime/dynamo_generate.py` (ai-dynamo/dynamo) points Slime's own
streaming generate function at the Dynamo frontend: `generate_streaming` reads the frontend
origin from `DYNAMO_ROLLOUT_URL` and calls Slime's `slime.rollout.sglang_streaming_rollout.
generate_streaming` (THUDM/slime), which POSTs SGLang's native `/generate` with `stream` true and
`return_logprob` true, and writes each cumulative SSE chunk's `meta_info.output_token_logprobs`
onto the sample through `Sample.append_response_tokens` (`slime/utils/types.py`: the status
from `finish_reason.type`, `length` truncated, `abort` aborted, `stop` completed; nothing
changes it when no chunk carries a finish reason). All these files are cited and pinned in
`fixtures/framework_clients/sources.json` and read, unchanged, from the directory
`RL_CONFORMANCE_SLIME_DYNAMO` names: it holds the Dynamo checkout as `dynamo/` and the Slime
checkout as `slime/`. `types.py` is loaded whole; from `sglang_rollout.py` only
`_prepare_prompt_ids` is taken (by name; the module needs Ray, numpy and the rest of Slime).

Stood in: `torch` (a `Tensor` type in annotations; nothing here is a tensor),
`decode_int32_meta_array` (the metadata carries neither routed experts nor top-p replay),
tracing (no-op spans), `GenerateState` (the tokenizer and processor are not reached for a
token-id prompt; `aborted` is the trainer's cancellation of the slot), and Slime's HTTP client
(`http_utils._http_client`: an `httpx.AsyncClient` with no timeout and `trust_env` false, as
`init_http_client` makes it). The frontend URL, the client and the cancellation are held per
adapter (scenarios run concurrently in one process) and reach the upstream functions through
the names they read (`os.environ["DYNAMO_ROLLOUT_URL"]`, `http_utils._http_client`,
`GenerateState(args).aborted`).

Slime's rollout loop keeps a sample for training unless its status is aborted (an aborted
sample goes back to the buffer); an exception out of the generate function ends the rollout.
The shim admits accordingly: the response tokens, the rollout log probabilities, the status as
finish reason. Slime sends no request identity, so the sample names none. The control half of
Dynamo's example (`dynamo_discovery.py` and Slime's external-engine administration through
each worker's `/engine` base) needs a Slime revision with `--rollout-external-dynamic-discovery
-path`, which no published Slime ref holds; generation only.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import contextvars
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from rl_conformance.certify import AdapterContext, CancelToken, RolloutRequest, Sample

from .upstream import Once, definitions, exec_module, source_text

CLIENT = "slime-dynamo-generation"
VARIABLE = "RL_CONFORMANCE_SLIME_DYNAMO"
GLUE = "dynamo/examples/rl/slime/dynamo_generate.py"
STREAMING = "slime/slime/rollout/sglang_streaming_rollout.py"
TYPES = "slime/slime/utils/types.py"
ROLLOUT = "slime/slime/rollout/sglang_rollout.py"


@dataclass(frozen=True)
class _Session:
    frontend_url: str
    client: httpx.AsyncClient
    cancel: CancelToken


_SESSION: contextvars.ContextVar[_Session] = contextvars.ContextVar("slime_dynamo_session")


class _Environ(Mapping[str, str]):
    """`os.environ` as the Dynamo glue reads it: `DYNAMO_ROLLOUT_URL` is this adapter's
    frontend."""

    def _values(self) -> dict[str, str]:
        return {"DYNAMO_ROLLOUT_URL": _SESSION.get().frontend_url}

    def __getitem__(self, key: str) -> str:
        return self._values()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())


class _HttpUtils(types.ModuleType):
    """`slime.utils.http_utils`: `_http_client` is this adapter's client."""

    @property
    def _http_client(self) -> httpx.AsyncClient:
        return _SESSION.get().client


class GenerateState:
    """`slime.rollout.sglang_rollout.GenerateState` as `generate_streaming` reads it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tokenizer = None
        self.processor = None

    @property
    def aborted(self) -> bool:
        return _SESSION.get().cancel.is_cancelled()


class _Span:
    def update(self, attrs: Any) -> None:
        return None


@contextlib.contextmanager
def trace_span(sample: Any, name: str, attrs: Any = None) -> Iterator[_Span]:
    yield _Span()


def decode_int32_meta_array(meta_info: dict[str, Any], keys: Any) -> None:
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    if any(meta_info.get(key) is not None for key in keys):
        raise NotImplementedError(f"{CLIENT}: int32 metadata arrays {keys} are not stood in")
    return None


def _not_used(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("not used by the certified path (multimodal inputs)")


def _stand_ins() -> dict[str, types.ModuleType]:
    names = (
        "torch",
        "slime",
        "slime.utils",
        "slime.utils.misc",
        "slime.utils.processing_utils",
        "slime.observability",
        "slime.observability.trace_utils",
        "slime.rollout",
        "slime.rollout.sglang_rollout",
    )
    modules = {name: types.ModuleType(name) for name in names}
    torch = modules["torch"]
    torch.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
    torch.is_tensor = lambda value: False  # type: ignore[attr-defined]
    modules["slime.utils.misc"].decode_int32_meta_array = decode_int32_meta_array  # type: ignore[attr-defined]
    modules["slime.utils.processing_utils"].encode_image_for_rollout_engine = _not_used  # type: ignore[attr-defined]
    tracing = modules["slime.observability.trace_utils"]
    tracing.trace_span = trace_span  # type: ignore[attr-defined]
    tracing.build_sglang_meta_trace_attrs = lambda meta: {}  # type: ignore[attr-defined]
    modules["slime.utils.http_utils"] = _HttpUtils("slime.utils.http_utils")
    modules["slime.utils"].http_utils = modules["slime.utils.http_utils"]  # type: ignore[attr-defined]
    return modules


def _module(name: str, relative: str) -> types.ModuleType:
    return exec_module(name, *source_text(CLIENT, VARIABLE, relative))




def _load() -> dict[str, Any]:
    glue_text, glue_path = source_text(CLIENT, VARIABLE, GLUE)  # the primary source first
    for name, module in _stand_ins().items():
        sys.modules.setdefault(name, module)
    sample_type = _module("slime.utils.types", TYPES).Sample
    rollout_text, rollout_path = source_text(CLIENT, VARIABLE, ROLLOUT)
    rollout = sys.modules["slime.rollout.sglang_rollout"]
    rollout.__dict__.update({"Any": Any, "Sample": sample_type})
    body = definitions(CLIENT, ast.parse(rollout_text, rollout_path), ("_prepare_prompt_ids",))
    module = ast.Module(body=body, type_ignores=[])
    exec(compile(module, rollout_path, "exec"), rollout.__dict__)
    rollout.GenerateState = GenerateState  # type: ignore[attr-defined]
    _module("slime.rollout.sglang_streaming_rollout", STREAMING)
    glue = types.ModuleType("dynamo_generate")
    glue.__file__ = glue_path
    exec(compile(glue_text, glue_path, "exec"), glue.__dict__)
    glue.os = types.SimpleNamespace(environ=_Environ())  # type: ignore[attr-defined]
    return {"generate_streaming": glue.generate_streaming, "Sample": sample_type}


load = Once(_load)
"""Dynamo's `generate_streaming` over Slime's, and Slime's `Sample`, loaded once."""


class SlimeDynamoGeneration:
    implements = frozenset({"generation"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.upstream = load()
        self.args = argparse.Namespace(
            ci_test=False, use_rollout_routing_replay=False, router_policy=None
        )
        self.client: httpx.AsyncClient | None = None

    async def generate(self, request: RolloutRequest) -> Sample | None:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=httpx.Timeout(None), trust_env=False)
        _SESSION.set(_Session(self.context.frontend_url, self.client, request.cancel))
        slime_sample = self.upstream["Sample"](tokens=list(request.prompt_ids))
        sampling_params = {
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "max_new_tokens": request.max_tokens,
            "stop": None,
            "stop_token_ids": None,
            "skip_special_tokens": False,
            "no_stop_trim": True,
            "spaces_between_special_tokens": False,
        }
        try:
            slime_sample = await self.upstream["generate_streaming"](
                self.args, slime_sample, sampling_params
            )
        except Exception as exc:  # the rollout ends with the exception
            print(f"slime: rollout {request.slot} failed: {exc!r}", file=sys.stderr)
            return None
        if slime_sample.status == slime_sample.Status.ABORTED:  # back to Slime's buffer
            return None
        sample = Sample(
            prompt_ids=request.prompt_ids,
            token_ids=tuple(slime_sample.tokens[len(request.prompt_ids) :]),
            logprobs=tuple(slime_sample.rollout_log_probs or ()),
            finish_reason=slime_sample.status.value,
            attempt_id="",
            model=self.context.model,
        )
        self.context.sink.admit(sample)
        return sample

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
