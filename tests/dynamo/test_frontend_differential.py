"""Our fake vLLM deployment held to the REAL Dynamo frontend, request by request.

The same generated bodies (`frontend_requests.py`: known fields, vLLM's and SGLang's own fields,
unknown fields, missing required fields, wrong types, values out of range, in combination) are
sent to the fake and to the real frontend, which must answer with the same status class and the
same response shape (keys and value types, not values; for a stream, the set of chunk shapes and
the `[DONE]` at the end). What still differs is listed, with the reason, in
`fixtures/KNOWN_DIFFERENCES.md` ("The request differential"); a listed difference that no longer
differs fails as stale.

The real deployments, one per release installed, each started once for the module by the
project's launcher (`dynamo_stack.running_stack`), the fake beside it playing the same release:

- Dynamo 1.6.1 + real vLLM 0.31.0 (`rl-conformance install-vllm`): every case. The engine shapes
  what the suite depends on most (log probabilities, `return_tokens_as_token_ids`, the token
  budget, what vLLM itself refuses), so real vLLM is the reference.
- Dynamo 1.6.1 + Dynamo's mocker (`rl-conformance install-dynamo`), and the 1.7 dev build + mocker
  (`rl-conformance install-dynamo --venv .venv-dynamo-1.7.0.dev20261026 --version
  1.7.0.dev20261026`; or real vLLM from `.venv-vllm-1.7*`): the cases the frontend alone decides.
  Measured behind 1.6.1, the mocker and real vLLM answered 275 of the 295 bodies alike; the 20
  others are all among the 35 the engine decides (`frontend_requests.engine_decided`: log
  probabilities, the token budget, vLLM's own refusals, sampling restrictions), which the
  mocker is not asked.

Cost on a 2-core machine: real vLLM 60 s to start (up to 2 minutes on a busy machine) and 10 s
of requests; each mocker 2 s and 5 s; the fakes under a second. Without an installation the
cases are skipped loudly (1.6.1 fails in CI, as every real-engine test; CI does not install the
1.7 build).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from dynamo_stack import Stack, running_stack
from frontend_requests import CASES, Case, engine_decided

from fake_backends.deployment.assembly import FakeDeployment

ROOT = Path(__file__).resolve().parents[2]
KNOWN_DIFFERENCES = ROOT / "fixtures" / "KNOWN_DIFFERENCES.md"
SECTION = "## The request differential"
NEXT_RELEASE = "1.7"
NEXT_INSTALL = (
    "rl-conformance install-dynamo --venv .venv-dynamo-1.7.0.dev20261026 "
    "--version 1.7.0.dev20261026"
)


@dataclass(frozen=True)
class Deployment:
    release: str
    engine: str
    python: Path | None = None
    """None: the conventional environment of the release, found by the session's fixtures."""

    @property
    def id(self) -> str:
        return f"{self.release}+{self.engine}"

    def asks(self, case: Case) -> bool:
        if self.release == NEXT_RELEASE and self.python is None:
            return case is CASES[0]  # not installed: one loud skip, not one per case
        return self.engine != "mocker" or engine_decided(case) is None


def next_release_deployments() -> list[Deployment]:
    """The 1.7 environments installed in the checkout (`install-vllm --dynamo-version` names
    them `.venv-vllm-D-V`; a mocker-only one `.venv-dynamo-D`), real vLLM first."""
    found = []
    for prefix, engine in ((".venv-vllm-", "vllm"), (".venv-dynamo-", "mocker")):
        for venv in sorted(ROOT.glob(f"{prefix}{NEXT_RELEASE}*")):
            if (venv / "bin" / "python").exists():
                release = venv.name.removeprefix(prefix).split("-")[0]
                found.append(Deployment(release, engine, venv / "bin" / "python"))
    return found[:1] or [Deployment(NEXT_RELEASE, "mocker")]


DEPLOYMENTS = (
    Deployment("1.6.1", "vllm"),
    Deployment("1.6.1", "mocker"),
    *next_release_deployments(),
)


def known_differences(text: str) -> dict[tuple[str, str], str]:
    """(case, deployment id) -> why, from the section's table: `| case | deployments | fake |
    real | why |`, each case and deployment in backticks."""
    _, _, section = text.partition(SECTION)
    rows: dict[tuple[str, str], str] = {}
    for line in section.split("\n## ")[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        for deployment in re.findall(r"`([^`]+)`", cells[1]):
            rows[(cells[0].strip("`"), deployment)] = cells[4]
    return rows


KNOWN = known_differences(KNOWN_DIFFERENCES.read_text())


@dataclass
class Pair:
    deployment: Deployment
    real: Stack
    fake: FakeDeployment
    client: httpx.Client


class Running:
    """The pair of the deployment asked for, started on first use and stopped when another is
    asked for or the module ends: the cases run deployment by deployment, so each starts once."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._stack = contextlib.ExitStack()
        self._current: Pair | None = None
        self._refused: dict[Deployment, str] = {}

    def pair(self, deployment: Deployment) -> Pair:
        if self._current is not None and self._current.deployment == deployment:
            return self._current
        self.close()
        if deployment in self._refused:
            pytest.skip(self._refused[deployment])
        python = deployment.python
        if python is None and deployment.release == NEXT_RELEASE:
            self._refused[deployment] = (
                f"REAL DYNAMO {NEXT_RELEASE} NOT INSTALLED: run `{NEXT_INSTALL}` first"
            )
            pytest.skip(self._refused[deployment])
        if python is None:
            fixture = "vllm_python" if deployment.engine == "vllm" else "dynamo_python"
            try:
                python = self._request.getfixturevalue(fixture)
            except pytest.skip.Exception as skipped:
                self._refused[deployment] = str(skipped)
                raise
        mocker = deployment.engine == "mocker"
        real = self._stack.enter_context(
            running_stack(python, deployment.engine, first_request_ok=mocker)
        )
        fake = self._stack.enter_context(
            FakeDeployment(
                "vllm", model=real.target.model, workers=1, dynamo_release=deployment.release
            )
        )
        client = self._stack.enter_context(httpx.Client(timeout=120.0, trust_env=False))
        self._current = Pair(deployment, real, fake, client)
        return self._current

    def close(self) -> None:
        self._current = None
        self._stack.close()


@pytest.fixture(scope="module")
def running(request: pytest.FixtureRequest) -> Iterator[Running]:
    deployments = Running(request)
    try:
        yield deployments
    finally:
        deployments.close()


def shape(value: Any, key: str = "") -> Any:
    """Keys with their shapes, list elements as a set of shapes, scalars as their JSON type;
    maps keyed by token or id (`top_logprobs`, prompt logprob positions) as a set of values."""
    if isinstance(value, dict):
        if value and (key == "top_logprobs" or all(k.isdigit() for k in value)):
            return {"<map>": sorted({_text(shape(v)) for v in value.values()})}
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", sorted({_text(shape(v, key)) for v in value})]
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(value, kind):
            return name
    return "null"


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    events: tuple[Any, ...] | None

    @property
    def signature(self) -> tuple[Any, ...]:
        if self.events is not None:
            chunks = [e for e in self.events if e != "[DONE]"]
            done = self.events[-1:] == ("[DONE]",)
            return self.status // 100, "sse", sorted({_text(shape(c)) for c in chunks}), done
        return self.status // 100, _text(shape(self.body))

    def said(self) -> str:
        if isinstance(self.body, dict) and "message" in self.body:
            return f"{self.status} {str(self.body['message'])[:160]}"
        return f"{self.status} {_text(self.signature)[:400]}"


def ask(client: httpx.Client, base: str, case: Case, model: str) -> Answer:
    reply = client.post(base + case.path, json=case.sent(model))
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        events = [
            "[DONE]" if line[5:].strip() == "[DONE]" else json.loads(line[5:])
            for line in reply.text.splitlines()
            if line.startswith("data:")
        ]
        return Answer(reply.status_code, None, tuple(events))
    try:
        body = reply.json() if reply.content else None
    except ValueError:
        body = reply.text
    return Answer(reply.status_code, body, None)


COMBINATIONS = [
    pytest.param(deployment, case, id=f"{deployment.id}: {case.name}")
    for deployment in DEPLOYMENTS
    for case in CASES
    if deployment.asks(case)
]


@pytest.mark.slow
@pytest.mark.parametrize(("deployment", "case"), COMBINATIONS)
def test_the_fake_answers_as_the_real_frontend(
    running: Running, deployment: Deployment, case: Case
) -> None:
    pair = running.pair(deployment)
    model = pair.real.target.model
    real = ask(pair.real.http, pair.real.frontend, case, model)
    fake = ask(pair.client, pair.fake.frontend_url, case, model)
    known = KNOWN.get((case.name, pair.deployment.id))
    if known is not None:
        assert fake.signature != real.signature, (
            f"stale: `{case.name}` on {pair.deployment.id} no longer differs (real {real.said()},"
            f" fake {fake.said()}): remove its row from {KNOWN_DIFFERENCES.name} ({known})"
        )
        return
    assert fake.signature == real.signature, (
        f"{case.name} on {pair.deployment.id}: real {real.said()}; fake {fake.said()}\n"
        f"body sent: {_text(case.sent(model))}\n"
        f"real: {_text(real.signature)[:1500]}\nfake: {_text(fake.signature)[:1500]}"
    )


def test_every_listed_difference_names_a_case_and_a_deployment() -> None:
    """A row of the section that names no generated case, or a deployment not of the
    `release+engine` form, would never be checked."""
    names = {case.name for case in CASES}
    assert KNOWN, f"no rows under {SECTION!r} in {KNOWN_DIFFERENCES.name}"
    for case, deployment in KNOWN:
        assert case in names, f"{KNOWN_DIFFERENCES.name} lists `{case}`, which is no case"
        release, _, engine = deployment.partition("+")
        assert re.fullmatch(r"\d+\.\d+[\w.]*", release) and engine in ("vllm", "mocker"), deployment
