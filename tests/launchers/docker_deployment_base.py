"""The valid deployment file the `DockerLauncher` tests start from (`BASE`): a frontend and a
GPU worker of the vLLM runtime image, the frontend's HTTP and RL ports published."""

from __future__ import annotations

from typing import Any

RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
FRONTEND_COMMAND = ["python3", "-m", "dynamo.frontend", "--http-port", "8000"]
WORKER_COMMAND = ["python3", "-m", "dynamo.vllm", "--model", "toy", "--enable-rl"]

BASE: dict[str, Any] = {
    "name": "nightly",
    "backend": "vllm",
    "model": "toy",
    "network": {"create": True},
    "containers": [
        {
            "name": "frontend",
            "image": RUNTIME,
            "command": FRONTEND_COMMAND,
            "environment": {"DYN_ENABLE_RL": "true", "DYN_RL_PORT": "8001"},
            "ports": [8000, 8001],
        },
        {
            "name": "worker",
            "image": RUNTIME,
            "command": WORKER_COMMAND,
            "environment": {"DYN_SYSTEM_PORT": "8081"},
            "gpus": "all",
        },
    ],
    "frontend": {"container": "frontend", "port": 8000},
    "rl": {"container": "frontend", "port": 8001},
    "readiness": {"path": "/v1/models", "deadline_s": 5, "interval_s": 0.05},
}
