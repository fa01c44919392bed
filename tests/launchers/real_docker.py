"""A real Docker daemon for the launcher's tests, and our fake backends as an image built offline.

The daemon runs with no bridge, no iptables and no masquerading (`dockerd --bridge=none
--iptables=false --ip-masq=false`): containers use the host's network, so every port stays on
loopback. Its data lives in a directory of its own, removed with it.

The base image is made without a registry: `debootstrap --variant=minbase --include=python3
bookworm` into a directory, kept as a tarball (`RL_CONFORMANCE_BASE_TARBALL`, by default under
/var/tmp so that later runs on the machine reuse it), then `docker import`. The fakes' image adds
our `fake_backends` and the third-party packages it imports, copied from this interpreter's
site-packages (the base's Debian Python is the same minor version).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "rl-conformance-base:bookworm"
FAKES_IMAGE = "rl-conformance-fakes:test"
BASE_TARBALL = Path(
    os.environ.get("RL_CONFORMANCE_BASE_TARBALL", "/var/tmp/rl-conformance-base-bookworm.tar")
)
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DAEMON_START_S = 60
DEBOOTSTRAP_S = 600


def skip_loudly(reason: str) -> None:
    print(f"\n!!! real Docker daemon tests SKIPPED: {reason} !!!", file=sys.stderr)
    pytest.skip(reason)


@dataclass
class Daemon:
    host: str
    """The DOCKER_HOST of this daemon (a unix socket)."""
    process: subprocess.Popen[bytes]
    root: Path
    log: Path

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no daemon log)"


@contextlib.contextmanager
def running_daemon() -> Iterator[Daemon]:
    """A dockerd of our own for the test's duration, or the test skipped naming why not."""
    why = os.environ.get("RL_CONFORMANCE_NO_DOCKERD")
    if why:
        skip_loudly(why)
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        if os.environ.get("CI"):
            pytest.fail(
                "dockerd is not installed although this is CI: .ci/run must install docker.io "
                "(or set RL_CONFORMANCE_NO_DOCKERD=<why>)"
            )
        skip_loudly("dockerd is not installed (Debian package docker.io)")
    if os.geteuid() != 0:
        skip_loudly("dockerd needs root, and these tests run as an unprivileged user")
    # Short paths: the daemon's unix sockets live under them (108 bytes at most).
    root = Path(tempfile.mkdtemp(prefix="rlcd-", dir="/tmp"))
    log = root / "dockerd.log"
    host = f"unix://{root}/docker.sock"
    command = [
        dockerd,
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "x"),
        "--pidfile",
        str(root / "dockerd.pid"),
        "-H",
        host,
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    daemon = Daemon(host, process, root, log)
    try:
        _wait_for(daemon)
        yield daemon
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        _unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)


def _unmount_under(root: Path) -> None:
    """What the daemon left mounted under its directories (its network namespace's nsfs)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    for point in sorted((p for p in points if p.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=30, check=False)


def _wait_for(daemon: Daemon) -> None:
    deadline = time.monotonic() + DAEMON_START_S
    while time.monotonic() < deadline:
        if daemon.process.poll() is not None:
            skip_loudly(f"dockerd exited at start-up:\n{daemon.log_tail()}")
        try:
            with contextlib.closing(daemon.client()) as client:
                client.ping()
            return
        except docker.errors.DockerException:
            time.sleep(0.5)
    skip_loudly(f"dockerd did not answer within {DAEMON_START_S} s:\n{daemon.log_tail()}")


def ensure_base_image(client: docker.DockerClient) -> None:
    """The base image on this daemon: imported from the cached tarball, made first if absent."""
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(BASE_IMAGE)
        return
    if not BASE_TARBALL.exists():
        _debootstrap(BASE_TARBALL)
    repository, tag = BASE_IMAGE.split(":")
    client.api.import_image_from_file(str(BASE_TARBALL), repository=repository, tag=tag)
    client.images.get(BASE_IMAGE)


def can_run_containers(client: docker.DockerClient, daemon: Daemon) -> None:
    """One container of the base on the host network, or the tests skipped loudly: a daemon
    that starts but cannot run containers here (a sandbox's seccomp, no overlay filesystem)
    says nothing about the launcher."""
    try:
        client.containers.run(
            BASE_IMAGE, ["python3", "-c", "print('ok')"], network_mode="host", remove=True
        )
    except docker.errors.DockerException as exc:
        skip_loudly(f"the daemon cannot run a container here: {exc}\n{daemon.log_tail()}")


def _debootstrap(tarball: Path) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        skip_loudly("debootstrap is not installed: the base image cannot be made offline")
    with tempfile.TemporaryDirectory(prefix="rl-conformance-rootfs-") as rootfs:
        done = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                "--include=python3",
                "bookworm",
                rootfs,
                DEBIAN_MIRROR,
            ],
            capture_output=True,
            text=True,
            timeout=DEBOOTSTRAP_S,
            check=False,
        )
        if done.returncode != 0:
            skip_loudly(f"debootstrap failed ({done.returncode}):\n{done.stderr[-1500:]}")
        partial = tarball.with_suffix(".partial")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-C", rootfs, "-cf", str(partial), "."], check=True, timeout=300)
        partial.replace(tarball)


def imported_packages() -> list[Path]:
    """The site-packages entries `python -m fake_backends` imports while serving a request."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "fake_backends",
            "vllm",
            "--port",
            str(port),
            "--rl-port",
            "0",
            "--control-port",
            "0",
            "--workers",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()  # the ready line
        import httpx

        httpx.post(
            f"http://127.0.0.1:{port}/v1/completions",
            json={"model": "toy", "prompt": [1, 2], "max_tokens": 2, "stream": True},
            timeout=10,
        )
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    names = set(re.findall(r"\|\s+([A-Za-z_][A-Za-z0-9_]*)(?:\.|$)", err, flags=re.MULTILINE))
    site = Path(sysconfig.get_paths()["purelib"])
    found = []
    for name in sorted(names):
        for candidate in (site / name, *site.glob(f"{name}.*py"), *site.glob(f"{name}.*.so")):
            if candidate.exists() and "dist-info" not in candidate.name:
                found.append(candidate)
    return found


DOCKERFILE = """\
FROM {base}
COPY site-packages /opt/rl-conformance/site-packages
COPY app /opt/rl-conformance/app
ENV PYTHONPATH=/opt/rl-conformance/app:/opt/rl-conformance/site-packages \\
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT ["python3", "-m", "fake_backends"]
"""


def build_fakes_image(client: docker.DockerClient) -> None:
    """Our fake backends as an image, built from the base with no registry and no network."""
    with tempfile.TemporaryDirectory(prefix="rl-conformance-image-") as context:
        place = Path(context)
        shutil.copytree(
            ROOT / "fake_backends",
            place / "app" / "fake_backends",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        packages = place / "site-packages"
        packages.mkdir()
        for entry in imported_packages():
            if entry.is_dir():
                shutil.copytree(
                    entry, packages / entry.name, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(entry, packages / entry.name)
        (place / "Dockerfile").write_text(DOCKERFILE.format(base=BASE_IMAGE))
        client.images.build(path=context, tag=FAKES_IMAGE, rm=True, network_mode="host")


def labelled(client: docker.DockerClient, label: str) -> tuple[list[str], list[str]]:
    """Containers and networks carrying `label` (any value), whatever their state."""
    containers = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    networks = [n.name for n in client.networks.list(filters={"label": label})]
    return containers, networks


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
