"""Miles' Dynamo engine control, certified through a thin shim (a known-bad client).

`miles/backends/dynamo_utils/dynamo_engine.py` (radixark/miles, on a pull-request branch; cited
and pinned in `fixtures/framework_clients/sources.json`) is loaded unchanged from the file
`RL_CONFORMANCE_MILES_DYNAMO` names. Its imports from the rest of Miles and from SGLang are
stood in for: `RayActor` (a plain base class), `SGLangEngine` (only three of its methods are
borrowed as class attributes, none called here), `_compute_server_args`,
`_wait_server_healthy`, `get_host_info` and `kill_process_tree` (called only by `init` and
`shutdown`, which launch and kill the worker process and are not used). It needs `requests`.

`DynamoEngine` is one Ray actor per `dynamo.sglang` worker; `init` would start the worker and
then record where it listens (`node_rank`, `server_host`, `server_port`). The shim builds one
engine per worker URL the deployment supplies and records that address as `init` would, rank
0. A refresh is Miles' own order of calls on its engines for a weight update
(`_pause_and_prepare_engines` and `_finalize_and_resume_engines` in its Megatron updater):
`pause_generation(mode=...)` with Miles' default `--pause-generation-mode retract` on every
engine, `flush_cache` on every engine (the mode is not `in_place`), then the weights, then
`continue_generation` on every engine. The kit's policy is a checkpoint directory, so the
weights step is `DynamoEngine.update_weights_from_disk(model_path)`, the engine's disk path
(Miles' `onload_weights_from_disk`). An exception out of an engine call ends the refresh, as
`ray.get` raising would end Miles' step: the shim reports it as `RefreshFailed`, and calls
nothing further. Miles generates through its own SGLang router client, so refresh only.
"""

from __future__ import annotations

import sys
import types
from typing import Any
from urllib.parse import urlsplit

from rl_conformance.certify import AdapterContext, Policy, RefreshFailed

from .upstream import Once, exec_module, source_text

CLIENT = "miles-dynamo-engine"
VARIABLE = "RL_CONFORMANCE_MILES_DYNAMO"
MODULE = "miles.backends.dynamo_utils.dynamo_engine"
PAUSE_MODE = "retract"
"""Miles' `--pause-generation-mode` default."""


def _not_used(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("not used by the certified path (worker launch and teardown)")


def _stand_ins() -> dict[str, types.ModuleType]:
    modules = {
        name: types.ModuleType(name)
        for name in (
            "sglang",
            "sglang.srt",
            "sglang.srt.utils",
            "miles",
            "miles.backends",
            "miles.backends.sglang_utils",
            "miles.backends.sglang_utils.sglang_engine",
            "miles.ray",
            "miles.ray.ray_actor",
            "miles.utils",
            "miles.utils.http_utils",
            "miles.backends.dynamo_utils",
        )
    }
    engine = modules["miles.backends.sglang_utils.sglang_engine"]
    engine.SGLangEngine = type(  # type: ignore[attr-defined]
        "SGLangEngine",
        (),
        {"update_weight_version": _not_used, "start_profile": _not_used, "stop_profile": _not_used},
    )
    engine._compute_server_args = _not_used  # type: ignore[attr-defined]
    engine._wait_server_healthy = _not_used  # type: ignore[attr-defined]
    modules["miles.ray.ray_actor"].RayActor = type("RayActor", (), {})  # type: ignore[attr-defined]
    modules["miles.utils.http_utils"].get_host_info = _not_used  # type: ignore[attr-defined]
    modules["sglang.srt.utils"].kill_process_tree = _not_used  # type: ignore[attr-defined]
    return modules


def _load() -> types.ModuleType:
    text, path = source_text(CLIENT, VARIABLE)
    for name, module in _stand_ins().items():
        sys.modules.setdefault(name, module)
    return exec_module(MODULE, text, path)


load = Once(_load)
"""The pinned module."""


class MilesDynamoEngine:
    implements = frozenset({"refresh"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        upstream = load()
        self.engines = []
        for rank, url in enumerate(context.worker_urls):
            engine = upstream.DynamoEngine(types.SimpleNamespace(), rank)
            address = urlsplit(url)
            engine.node_rank = 0
            engine.server_host = address.hostname
            engine.server_port = address.port
            self.engines.append(engine)

    def refresh_policy(self, policy: Policy) -> None:
        try:
            for engine in self.engines:
                engine.pause_generation(mode=PAUSE_MODE)
            if PAUSE_MODE not in ("in_place"):
                for engine in self.engines:
                    engine.flush_cache()
            for engine in self.engines:
                engine.update_weights_from_disk(policy.model_path)
            for engine in self.engines:
                engine.continue_generation()
        except Exception as exc:  # Miles' ray.get raises and the training step ends
            raise RefreshFailed(f"miles: {exc!r}") from exc

    def close(self) -> None:
        return None
