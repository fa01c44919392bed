"""The real column behind a real ingress: vLLM 0.31.0 (CPU build) behind the real Dynamo 1.6.1
frontend and RL listener, both behind Debian's nginx (TLS with a CA and client certificates made
here, bearer authentication, gzip on JSON, its default proxy buffering on event streams,
keep-alive), reached by URL with `--ca-bundle`, `--client-cert` and `--token-env` as a user
behind an ingress reaches theirs, mutations allowed on every worker.

Its matrix is the direct one cell for cell: the launched column's reviewed cells
(`test_real_vllm.py`) with the two a deployment reached by URL cannot offer (a listener restart,
the frontend's request trace). Measured once beside a direct run by URL of the same deployment:
59 of 59 cells the same (Dynamo 1.6.1, vLLM 0.31.0). One launch and one run: about 2.5 minutes
to start the engine and 2 to run on a loaded 2-core machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tls_material

from rl_conformance.launchers.dynamo import DynamoLauncher
from rl_conformance.model.target import Target

from .nginx_ingress import ingress
from .test_real_dynamo import run_launch
from .test_real_vllm import SKIPPED, UNSUPPORTED

pytestmark = pytest.mark.slow
TOKEN = "ingress-token-real-8d2e41"
BY_URL_SKIPPED = {
    "namespace.scope": "restarting the RL listener under a chosen environment: a launcher's",
    "telemetry.trace_correlation": "the frontend's request trace is not given (--request-trace)",
}


@pytest.fixture(scope="module")
def deployment(vllm_python: Path, nginx: str) -> Iterator[tuple[Target, str]]:
    """The deployment and the checkpoint its worker was started on: its discovery names the
    model, not a path, so a run that changes the weights is told where to restore them from."""
    launcher = DynamoLauncher("vllm", python=vllm_python)
    try:
        target = launcher.start()
        assert launcher.served_path is not None
        yield target, launcher.served_path
    finally:
        launcher.stop()


def test_the_real_vllm_column_through_nginx_is_the_direct_one(
    deployment: tuple[Target, str],
    nginx: str,
    vllm_python: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target, served_path = deployment
    monkeypatch.setenv("INGRESS_TOKEN", TOKEN)
    pki = tls_material.make(tmp_path / "pki")
    assert target.rl_url is not None
    upstreams = {"frontend": target.frontend_url, "rl": target.rl_url}
    arguments = [
        *("--backend", "vllm", "--allow-mutations", "--all-workers"),
        *("--reference-python", str(vllm_python)),
        *("--ca-bundle", str(pki.ca.cert)),
        *("--client-cert", str(pki.client.cert), "--client-key", str(pki.client.key)),
        *("--token-env", "INGRESS_TOKEN"),
    ]
    for path in target.update_model_paths:
        arguments += ["--update-model-path", path]
    arguments += ["--restore-model-path", served_path]
    asking = pki.client_ca.cert
    with ingress(
        nginx, tmp_path / "nginx", upstreams, pki.server, client_ca=asking, token=TOKEN
    ) as fronted:
        matrix = run_launch(
            tmp_path / "report",
            "--frontend",
            fronted.url("frontend"),
            "--rl-url",
            fronted.url("rl"),
            *arguments,
            timeout_s=1200,
        )
        served = fronted.served()
    expected = {**dict.fromkeys(SKIPPED, "skipped"), **dict.fromkeys(BY_URL_SKIPPED, "skipped")}
    expected.update(dict.fromkeys(UNSUPPORTED, "unsupported"))
    (column,) = matrix["targets"]
    wrong = {
        row["id"]: (row["cells"][column["id"]]["outcome"], row["cells"][column["id"]]["reason"])
        for row in matrix["capabilities"]
        if row["cells"][column["id"]]["outcome"] != expected.get(row["id"], "pass")
    }
    assert not wrong, (wrong, matrix["stdout"][-2000:])
    assert matrix["complete"] and matrix["exit_status"] == 0
    assert any(line.gzipped for line in served) and any(
        line.requests_on_connection > 1 for line in served
    )
    assert not any(note.startswith("plane down") for note in column["notes"])
    assert not [line for line in served if line.status == 401]
