"""A user's mistake is never the deployment's failure: each wrong input, run through the command
line against servers started here on 127.0.0.1 (our faithful fake vLLM, a plain web server, a
closed port), is refused before anything starts or by the preflight before any test (exit 2, one
message naming the input and the fix; the preflight's also in the matrix, every cell `error`
with it), or leaves the target not reached (exit 3, its cause said once): never a `fail`.
pytest's footer counts what the matrix counts, and console lines are cut between words, never
inside one.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fake_backends.deployment.assembly import FakeDeployment
from rl_conformance.checks import schema_check

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
CONSOLE_LINE = re.compile(r"^(ERROR|FAIL) (\S+) on (\S+): (.*)$")


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def web_server(directory: Path) -> Iterator[str]:
    """What `python -m http.server --bind 127.0.0.1` serves (a directory listing, HTML error
    pages), on an ephemeral port: a web server that is not Dynamo."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=directory))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rl_conformance", *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=cwd,
        check=False,
    )


def run(directory: Path, *flags: str, cwd: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """A read-only run; the cells of its one target by capability."""
    done = cli("run", "-q", "--report-dir", str(directory), *flags, cwd=cwd)
    matrix_path = directory / "matrix.json"
    assert matrix_path.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    matrix = json.loads(matrix_path.read_text())
    (target,) = matrix["targets"]
    cells = {row["id"]: row["cells"][target["id"]] for row in matrix["capabilities"]}
    assert_console_shows_whole_reasons(done.stdout, cells)
    return done, cells


def capabilities(*ids: str) -> list[str]:
    return [flag for capability in ids for flag in ("--capability", capability)]


def assert_target_reported_as_given(directory: Path, url: str) -> None:
    """The matrix conforms to its schema and names the deployment by the URL the user gave."""
    matrix = json.loads((directory / "matrix.json").read_text())
    assert schema_check("matrix", matrix).passed
    assert matrix["targets"][0]["frontend_url"] == url


def assert_no_fail_and_errors_name(cells: dict[str, Any], *needles: str) -> None:
    """No cell is `fail`; every judged cell is `error` and its reason names the input."""
    assert not {c: cell["reason"] for c, cell in cells.items() if cell["outcome"] == "fail"}
    for capability, cell in cells.items():
        assert cell["outcome"] == "error", (capability, cell["outcome"], cell["reason"])
        for needle in needles:
            assert needle in cell["reason"], (capability, needle, cell["reason"])


def assert_cause_shown_once(stdout: str, errors: int | None = None, status: int = 3) -> None:
    """The cause is a banner printed once, not a line per cell; the counts are the matrix's
    cells (none fail), and the exit status is explained: a wrong input the preflight refused
    (2), or a target not reached (3)."""
    assert stdout.count("NOT REACHED ") == 1, stdout[-3000:]
    (counts,) = [line for line in stdout.splitlines() if line.startswith("cells: ")]
    assert " 0 fail," in counts and re.search(rf"\b{errors or '[0-9]+'} error\b", counts), counts
    said = {2: "exit 2: a wrong command or input", 3: "exit 3: a target was not reached"}
    assert said[status] in stdout


def assert_console_shows_whole_reasons(stdout: str, cells: dict[str, Any]) -> None:
    """Its output is not a terminal (a CI log): each failing cell's reason is printed whole,
    wrapped onto indented lines, never cut (reports.console)."""
    lines = stdout.splitlines()
    for position, line in enumerate(lines):
        found = CONSOLE_LINE.match(line)
        if found is None or found.group(2) not in cells:
            continue
        shown = [found.group(4)]
        for more in lines[position + 1 :]:
            if not more.startswith("  "):
                break
            shown.append(more.strip())
        reason = " ".join(cells[found.group(2)]["reason"].split())
        assert " ".join(shown) == reason, (line, reason)


@pytest.fixture(scope="module")
def fleet() -> Iterator[FakeDeployment]:
    with FakeDeployment("vllm") as deployment:
        yield deployment


def by_url(fleet: FakeDeployment, **changes: str) -> list[str]:
    flags = {
        "--frontend": fleet.frontend_url,
        "--rl-url": fleet.rl_url,
        "--backend": "vllm",
        **{f"--{name.replace('_', '-')}": value for name, value in changes.items()},
    }
    return [item for pair in flags.items() for item in pair]


# -- found once the deployment answers: error cells, never fail -----------------------------------


def test_a_model_the_deployment_does_not_serve(fleet: FakeDeployment, tmp_path: Path) -> None:
    done, cells = run(
        tmp_path,
        *by_url(fleet, model="no-such-model"),
        "--read-only",
        *capabilities("tokens.token_input", "refresh.pause_gates", "refresh.version_verified"),
    )
    assert done.returncode == 2
    assert_no_fail_and_errors_name(cells, "--model no-such-model is not served", "give --model toy")
    assert_target_reported_as_given(tmp_path, fleet.frontend_url)
    assert all(
        item["check_id"] == "input.model" for item in cells["tokens.token_input"]["evidence"]
    )
    assert_cause_shown_once(done.stdout, status=2)
    assert_not_comparable(tmp_path, "preflight refused", "--model no-such-model")


def test_rl_url_naming_the_frontend_under_another_name(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    if socket.gethostbyname("localhost") != "127.0.0.1":
        pytest.skip("localhost is not 127.0.0.1 here")
    other_name = fleet.frontend_url.replace("127.0.0.1", "localhost")
    done, cells = run(
        tmp_path,
        *by_url(fleet, rl_url=other_name),
        "--read-only",
        *capabilities("discovery.schema", "admin.success_semantics", "tokens.token_input"),
    )
    assert done.returncode == 2
    assert_no_fail_and_errors_name(
        cells, f"--rl-url {other_name} is a frontend: it lists models at /v1/models"
    )
    assert not any(cell["contradicts_documentation"] for cell in cells.values())


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            lambda f: by_url(f, rl_url=f.frontend_url + "/v1"),
            lambda f: (
                f"--rl-url {f.frontend_url}/v1 is the frontend's OpenAI base URL, not the "
                "RL listener's (give the RL listener's own URL: DYN_RL_PORT, port 8001 by default)"
            ),
        ),
        (
            lambda f: by_url(f, rl_url=f.rl_url + "/v1"),
            lambda f: (
                f"--rl-url {f.rl_url}/v1 is the RL listener with a path (give --rl-url "
                f"{f.rl_url}: the suite adds /v1/rl/workers itself)"
            ),
        ),
        (
            lambda f: by_url(f, frontend=f.rl_url, rl_url=f.frontend_url),
            lambda f: (
                f"--frontend {f.rl_url} is Dynamo's RL listener and --rl-url "
                f"{f.frontend_url} the frontend: they are swapped "
                f"(give --frontend {f.frontend_url} --rl-url {f.rl_url})"
            ),
        ),
        (
            lambda f: [*by_url(f), "--allow-mutations", "--worker", "12345"],
            lambda f: (
                "--worker 12345 is not a worker of this deployment (give --worker with an "
                f"id discovery lists, or --all-workers): GET {f.rl_url}/v1/rl/workers lists "
                + ", ".join(str(worker["instance_id"]) for worker in f.workers)
            ),
        ),
    ],
    ids=["frontend-openai-base-url-as-rl-url", "listener-with-path", "swapped", "worker-id"],
)
def test_a_wrong_url_or_worker_id_is_refused_by_the_preflight_in_one_sentence(
    fleet: FakeDeployment, tmp_path: Path, flags: Any, said: Any
) -> None:
    """Exit 2, the one sentence with its fix printed once, every cell an error naming it, and
    a matrix `diff` and `baseline` call not comparable: never the deployment's failure."""
    done, cells = run(
        tmp_path, *flags(fleet), *capabilities("tokens.token_input", "discovery.schema")
    )
    assert done.returncode == 2, done.stdout[-2000:]
    assert_no_fail_and_errors_name(cells, said(fleet))
    assert_cause_shown_once(done.stdout, 2, status=2)
    assert_not_comparable(tmp_path, "preflight refused", said(fleet))


def assert_not_comparable(directory: Path, cause: str, needle: str) -> None:
    matrix = json.loads((directory / "matrix.json").read_text())
    assert matrix["comparable"] is False
    assert matrix["not_comparable"]["cause"] == cause
    assert needle in matrix["not_comparable"]["reason"]


def test_a_web_server_that_is_not_dynamo(tmp_path: Path) -> None:
    with web_server(tmp_path) as frontend, web_server(tmp_path) as listener:
        done, cells = run(
            tmp_path / "with-model",
            *("--frontend", frontend, "--rl-url", listener, "--backend", "vllm", "--model", "toy"),
            *capabilities("tokens.token_input", "discovery.schema", "stream.done_last"),
        )
        assert done.returncode == 2
        assert_no_fail_and_errors_name(
            cells, f"--frontend {frontend} is not a Dynamo frontend", "HTML page", "--rl-url"
        )
        for cell in cells.values():
            assert "<" not in cell["reason"]  # the page's text, not its markup
        assert_target_reported_as_given(tmp_path / "with-model", frontend)
        done, cells = run(
            tmp_path / "without-model",
            *("--frontend", frontend, "--backend", "vllm"),
            *capabilities("tokens.token_input", "tokens.model_identity"),
        )
        assert_no_fail_and_errors_name(cells, f"--frontend {frontend} is not a Dynamo frontend")
        assert not [cell for cell in cells.values() if "use --model" in cell["reason"]]


def test_a_backend_flag_the_discovery_contradicts(fleet: FakeDeployment, tmp_path: Path) -> None:
    _, cells = run(
        tmp_path,
        *by_url(fleet, backend="sglang"),
        "--read-only",
        *capabilities("generate.native_route", "discovery.worker_registration"),
    )
    assert_no_fail_and_errors_name(
        cells, "--backend sglang is contradicted by discovery (give --backend vllm)"
    )
    assert "resume_generation" in cells["generate.native_route"]["reason"]


def test_an_unreachable_frontend_is_not_reached_and_said_once(tmp_path: Path) -> None:
    done, cells = run(
        tmp_path,
        *("--frontend", f"http://127.0.0.1:{closed_port()}", "--backend", "vllm"),
        *capabilities("tokens.model_identity", "tokens.token_input"),
    )
    assert done.returncode == 3
    assert_no_fail_and_errors_name(cells, "the frontend did not answer: preflight GET")
    assert not [cell for cell in cells.values() if "AssertionError" in cell["reason"]]
    assert_cause_shown_once(done.stdout, 2)
    assert_not_comparable(tmp_path, "not reached", "the frontend did not answer")


# -- known before anything starts: exit 2, one message --------------------------------------------


def refused(*arguments: str, cwd: Path | None = None) -> str:
    done = cli(*arguments, cwd=cwd)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("rl-conformance: ")
    return line


def test_rl_url_equal_to_the_frontend_is_refused(fleet: FakeDeployment, tmp_path: Path) -> None:
    said = refused(
        "run", "--report-dir", str(tmp_path), *by_url(fleet, rl_url=fleet.frontend_url + "/")
    )
    assert f"--rl-url {fleet.frontend_url}/ is the --frontend URL" in said
    assert "give the RL listener's URL" in said
    assert not (tmp_path / "matrix.json").exists()


def test_one_update_path_where_two_are_needed_is_refused(
    fleet: FakeDeployment, tmp_path: Path
) -> None:
    said = refused(
        "run",
        *("--report-dir", str(tmp_path), *by_url(fleet), "--allow-mutations", "--all-workers"),
        *("--update-model-path", "/checkpoints/only"),
    )
    assert "--update-model-path: expected two" in said
    assert "observed one (/checkpoints/only): give a second --update-model-path PATH" in said


@pytest.mark.parametrize("jobs", ["auto", "1"])
def test_an_unknown_fault_is_refused_whole(tmp_path: Path, jobs: str) -> None:
    said = refused(
        "run", "--report-dir", str(tmp_path), "--fake", "vllm", "--jobs", jobs,
        "--fault", "routes_unsortd",
    )  # fmt: skip
    assert said.startswith("rl-conformance: --fault routes_unsortd: our fakes have no fault")
    assert "did you mean routes_unsorted" in said and said.endswith("names")
    assert "ready line" not in said


def test_a_relative_path_is_resolved_where_the_user_is(tmp_path: Path) -> None:
    said = refused(
        "run",
        *("--launch", "dynamo-mocker", "--dynamo-python", ".venv-dynamo/bin/python"),
        cwd=tmp_path,
    )
    assert f"--dynamo-python {tmp_path}/.venv-dynamo/bin/python: no such file" in said
    python = tmp_path / "venv" / "bin" / "python"  # a python without Dynamo, named relatively
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    _, cells = run(
        tmp_path / "report",
        *("--launch", "dynamo-mocker", "--dynamo-python", "venv/bin/python"),
        *capabilities("tokens.token_input"),
        cwd=tmp_path,
    )
    assert_no_fail_and_errors_name(cells, f"{python} has no ai-dynamo")


def test_the_readme_adapter_example_runs_from_the_repository_root(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "rl-conformance"
    if not script.exists():
        pytest.skip("no rl-conformance console script next to this python")
    done = subprocess.run(
        [
            *(str(script), "certify-adapter", "examples.my_adapter:MyAdapter"),
            *("--report-dir", str(tmp_path), "--scenario", "iteration", "-q"),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=False,
    )
    assert "No module named" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "matrix.json").exists()
