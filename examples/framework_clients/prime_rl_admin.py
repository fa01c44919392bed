"""Prime-RL's Dynamo administration, certified through a thin shim.

`src/prime_rl/inference/dynamo_admin.py` (PrimeIntellect-ai/prime-rl, cited and pinned in
`fixtures/framework_clients/sources.json`) is loaded unchanged from the file
`RL_CONFORMANCE_PRIME_RL_ADMIN` names. Its three imports from the rest of Prime-RL are stood in
for here: `ClientConfig` (a type in a signature the shim does not call), `get_logger` (the
standard logger) and `gather_shielded` (awaits every task, shielded from the caller's
cancellation, and returns the results with the cancellation, as `_settle_fanout` uses it). It
also needs `tenacity`.

Prime-RL generates through its own OpenAI client, so the shim implements the refresh only:
per refresh, the framework's discovery (bounded by the kit's control deadline instead of
Prime-RL's half-hour start-up wait), its membership check against the first refresh's workers,
then `DynamoAdminAPI.update_weights` with the checkpoint directory and the training step.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import types
from pathlib import Path
from typing import Any

import httpx

from rl_conformance.certify import AdapterContext, Policy

from .upstream import Once, exec_module, source_text

CLIENT = "prime-rl-dynamo-admin"
VARIABLE = "RL_CONFORMANCE_PRIME_RL_ADMIN"
MODULE = "prime_rl.inference.dynamo_admin"


async def gather_shielded(*tasks: Any) -> tuple[list[Any], BaseException | None]:
    """Every task's result (an exception as a value), awaited to the end even when the caller
    is cancelled meanwhile; that cancellation is returned alongside."""
    gathered = asyncio.gather(*tasks, return_exceptions=True)
    cancellation: BaseException | None = None
    while True:
        try:
            return list(await asyncio.shield(gathered)), cancellation
        except asyncio.CancelledError as exc:
            cancellation = exc


def _stand_ins() -> dict[str, types.ModuleType]:
    modules = {
        name: types.ModuleType(name)
        for name in (
            "prime_rl",
            "prime_rl.configs",
            "prime_rl.configs.shared",
            "prime_rl.utils",
            "prime_rl.utils.async_utils",
            "prime_rl.utils.logger",
            "prime_rl.inference",
        )
    }
    modules["prime_rl.configs.shared"].ClientConfig = type("ClientConfig", (), {})  # type: ignore[attr-defined]
    modules["prime_rl.utils.async_utils"].gather_shielded = gather_shielded  # type: ignore[attr-defined]
    modules["prime_rl.utils.logger"].get_logger = lambda: logging.getLogger("prime_rl")  # type: ignore[attr-defined]
    return modules


def _load() -> types.ModuleType:
    text, path = source_text(CLIENT, VARIABLE)
    for name, module in _stand_ins().items():
        sys.modules.setdefault(name, module)
    return exec_module(MODULE, text, path)


load = Once(_load)
"""The pinned module."""


class PrimeRLDynamoAdmin:
    implements = frozenset({"refresh"})

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.upstream = load()
        self.admin = self.upstream.DynamoAdminAPI()
        self.topology = self.upstream.DynamoTopology(("agg",) * context.expected_workers, 1)
        self.members: Any = None

    async def refresh_policy(self, policy: Policy) -> None:
        upstream = self.upstream
        async with httpx.AsyncClient(base_url=self.context.rl_url) as discovery:
            workers = await upstream.discover_workers(
                [discovery],
                self.context.control_timeout_s,
                model_name=self.context.model,
                topology=self.topology,
            )
        if self.members is None:
            self.members = workers
        else:
            upstream.validate_worker_membership(self.members, workers)
        clients = [httpx.AsyncClient(base_url=worker.system_url) for worker in workers]
        try:
            await self.admin.update_weights(clients, Path(policy.model_path), step=policy.step)
        finally:
            for client in clients:
                await client.aclose()

    async def close(self) -> None:
        return None
