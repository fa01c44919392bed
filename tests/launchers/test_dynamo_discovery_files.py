"""A restarted worker is ready only once file discovery holds no more `generate` instances than
workers run: the dead worker's registration, left behind until its lease expires, is counted."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from rl_conformance.launchers.dynamo import DynamoLauncher


def register(kv: Path, key: str) -> None:
    instances = kv / "v1" / "instances"
    instances.mkdir(parents=True, exist_ok=True)
    (instances / urllib.parse.quote(key, safe="")).write_text("{}")


def test_each_generate_instance_is_counted_once(tmp_path: Path) -> None:
    launcher = DynamoLauncher(engine="mocker", workdir=tmp_path)
    assert launcher._generate_instances() is None  # no discovery directory of ours
    kv = tmp_path / "kv"
    for instance in ("509e0377c975c636", "193f2e850b9ac5dd"):
        for endpoint in ("generate", "clear_kv_blocks", "list_loras"):
            register(kv, f"dynamo/backend/{endpoint}/{instance}")
    register(kv, "dynamo/backend/clear_kv_blocks/a9145873829c556a")
    assert launcher._generate_instances() == {"509e0377c975c636", "193f2e850b9ac5dd"}
