"""The Dynamo runtime of a worker process, connected the way the launcher configured it (file
discovery, tcp request plane, zmq event plane, unless the environment says otherwise). Import
only inside the Dynamo environment."""

from __future__ import annotations

import asyncio
import os
from typing import Any


def distributed_runtime() -> Any:
    from dynamo.runtime import DistributedRuntime  # type: ignore[import-not-found]

    return DistributedRuntime(
        asyncio.get_running_loop(),
        os.environ.get("DYN_DISCOVERY_BACKEND", "file"),
        os.environ.get("DYN_REQUEST_PLANE", "tcp"),
        event_plane=os.environ.get("DYN_EVENT_PLANE", "zmq"),
    )
