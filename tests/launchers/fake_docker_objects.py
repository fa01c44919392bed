"""What the fake Docker Engine (`fake_docker_engine`) keeps: the calls it received, the script a
container follows, its containers with their Engine API 1.45 inspect and list shapes and their
multiplexed logs, image references and filters read as the engine reads them, and the error a
handler raises to answer an HTTP status."""

from __future__ import annotations

import hashlib
import json
import struct
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    """One request as the engine received it; `path` drops the `/v1.45` prefix."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def filters(self) -> dict[str, Any]:
        raw = self.param("filters")
        return json.loads(raw) if raw else {}


@dataclass(frozen=True)
class ContainerScript:
    """What a fake container does once started: print `log_lines` (stdout) and `stderr_lines`,
    exit with `exit_code` after `exit_after_s` (never, when `exit_code` is None), and report its
    published container ports on the given host ports (others get made-up ports)."""

    log_lines: tuple[str, ...] = ("starting",)
    stderr_lines: tuple[str, ...] = ()
    exit_code: int | None = None
    exit_after_s: float = 0.0
    host_ports: dict[int, int] = field(default_factory=dict)


@dataclass
class FakeContainer:
    id: str
    name: str
    image: str
    image_id: str
    body: dict[str, Any]
    labels: dict[str, str]
    script: ContainerScript
    created: float = field(default_factory=time.time)
    started_at: float | None = None
    stopped_code: int | None = None
    ports: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def exit_code(self) -> int | None:
        """The exit code if the container has exited (stopped, or its script ran out)."""
        if self.stopped_code is not None:
            return self.stopped_code
        script, started = self.script, self.started_at
        if started is not None and script.exit_code is not None:
            return script.exit_code if time.time() >= started + script.exit_after_s else None
        return None

    def status(self) -> str:
        if self.started_at is None:
            return "created"
        return "exited" if self.exit_code() is not None else "running"

    def networks(self) -> list[str]:
        mode = self.body.get("HostConfig", {}).get("NetworkMode") or "default"
        configured = list((self.body.get("NetworkingConfig") or {}).get("EndpointsConfig") or {})
        return configured or [mode]

    def inspect(self) -> dict[str, Any]:
        status = self.status()
        config = {
            "Hostname": self.id[:12],
            "Image": self.image,
            "Cmd": self.body.get("Cmd"),
            "Env": self.body.get("Env") or [],
            "Labels": self.labels,
            "ExposedPorts": self.body.get("ExposedPorts") or {},
            "Tty": False,
            "AttachStdout": False,
            "AttachStderr": False,
        }
        cmd = self.body.get("Cmd") or []
        return {
            "Id": self.id,
            "Created": iso(self.created),
            "Path": cmd[0] if cmd else "",
            "Args": cmd[1:],
            "State": {
                "Status": status,
                "Running": status == "running",
                "Paused": False,
                "Restarting": False,
                "OOMKilled": False,
                "Dead": False,
                "Pid": 4242 if status == "running" else 0,
                "ExitCode": self.exit_code() or 0,
                "Error": "",
                "StartedAt": iso(self.started_at) if self.started_at else ZERO_TIME,
                "FinishedAt": ZERO_TIME,
            },
            "Image": self.image_id,
            "Name": "/" + self.name,
            "RestartCount": 0,
            "Driver": "overlay2",
            "Config": config,
            "HostConfig": self.body.get("HostConfig") or {},
            "Mounts": [],
            "NetworkSettings": {
                "Ports": self.ports if status == "running" else {},
                "Networks": {
                    name: {"NetworkID": "", "Aliases": aliases(self.body, name)}
                    for name in self.networks()
                },
            },
        }

    def summary(self) -> dict[str, Any]:
        """The shape of one entry of GET /containers/json."""
        cmd = self.body.get("Cmd") or []
        return {
            "Id": self.id,
            "Names": ["/" + self.name],
            "Image": self.image,
            "ImageID": self.image_id,
            "Command": " ".join(cmd),
            "Created": int(self.created),
            "State": self.status(),
            "Status": "Up 1 second" if self.status() == "running" else "Exited",
            "Labels": self.labels,
            "Ports": [],
        }

    def log_frames(self, tail: str | None) -> bytes:
        """Engine log stream for a container without a TTY: 8-byte frame headers
        (stream type, three zero bytes, big-endian length) before each line."""
        if self.started_at is None:
            return b""
        lines = [(1, line) for line in self.script.log_lines]
        lines += [(2, line) for line in self.script.stderr_lines]
        if self.exit_code() is not None and self.script.exit_code is not None:
            lines.append((2, f"exiting with code {self.script.exit_code}"))
        if tail not in (None, "all"):
            lines = lines[-int(str(tail)) :] if int(str(tail)) > 0 else []
        out = b""
        for stream, line in lines:
            data = (line + "\n").encode()
            out += struct.pack(">BxxxL", stream, len(data)) + data
        return out


ZERO_TIME = "0001-01-01T00:00:00Z"


def iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + ".000000000Z"


def aliases(body: dict[str, Any], network: str) -> list[str]:
    endpoints = (body.get("NetworkingConfig") or {}).get("EndpointsConfig") or {}
    return list((endpoints.get(network) or {}).get("Aliases") or [])


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` into (repo, tag); a colon inside a registry host:port is not a tag."""
    if "@" in ref:
        repo, digest = ref.split("@", 1)
        return repo, digest
    head, _, last = ref.rpartition("/")
    if ":" in last:
        name, tag = last.split(":", 1)
        return (f"{head}/{name}" if head else name), tag
    return ref, "latest"


def normal_ref(ref: str) -> str:
    repo, tag = split_ref(ref)
    return f"{repo}@{tag}" if tag.startswith("sha256:") else f"{repo}:{tag}"


class EngineError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def matches_filters(filters: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    """Engine filter semantics for `label` (`key` or `key=value`, all must hold) and `name`
    (substring); filter values come as a list or as a {value: true} map."""
    for kind, values in filters.items():
        wanted = list(values) if isinstance(values, list | dict) else [values]
        for value in wanted:
            if kind == "label":
                key, has_value, expected = str(value).partition("=")
                if key not in labels or (has_value and labels[key] != expected):
                    return False
            elif kind == "name":
                if str(value) not in name:
                    return False
            else:
                raise EngineError(400, f"invalid filter '{kind}'")
    return True
