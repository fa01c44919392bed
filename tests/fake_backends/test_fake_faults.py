"""Every fault in the catalogue manifests: each is demonstrated by a test that compares a faulty
answer with a clean one, in the module of its topic, registered with ``@shows``.

The modules imported below register their demonstrations; the completeness check here fails if a
fault of the catalogue has none, so adding a fault without a test is caught.
"""

from __future__ import annotations

import pytest
import test_fake_admin_vllm  # noqa: F401  (registers the pause-abort demonstration)
import test_fake_admin_vllm_sidecar  # noqa: F401  (registers the sidecar demonstrations)
import test_fake_control_faults  # noqa: F401  (registers the control-plane demonstrations)
import test_fake_discovery_faults  # noqa: F401  (registers the discovery demonstrations)
import test_fake_distributed_faults  # noqa: F401  (registers the distributed-update demonstrations)
import test_fake_held_request_faults  # noqa: F401  (registers the held-request demonstrations)
import test_fake_logprob_faults  # noqa: F401  (registers the log-probability demonstrations)
import test_fake_metadata_upload  # noqa: F401  (registers the metadata_upload demonstrations)
import test_fake_pause_mode_faults  # noqa: F401  (registers the pause-mode demonstrations)
import test_fake_probe_faults  # noqa: F401  (registers the route-probe demonstrations)
import test_fake_refit_faults  # noqa: F401  (registers the several-refits demonstrations)
import test_fake_request_faults  # noqa: F401  (registers the request-handling demonstrations)
import test_fake_response_faults  # noqa: F401  (registers the response demonstrations)
import test_fake_stream_faults  # noqa: F401  (registers the stream-level data demonstrations)
import test_fake_stream_shape_faults  # noqa: F401  (registers the stream-shape demonstrations)
import test_fake_token_id_faults  # noqa: F401  (registers the token-id demonstrations)
import test_fake_trace_faults  # noqa: F401  (registers the request-trace demonstrations)
import test_fake_version_faults  # noqa: F401  (registers the weight-version demonstrations)
from fake_backend_helpers import DEMONSTRATED

from fake_backends import FAULT_NAMES
from fake_backends.deployment.assembly import FakeDeployment


@pytest.mark.parametrize("name", FAULT_NAMES)
def test_every_fault_is_demonstrated(name: str) -> None:
    assert name in DEMONSTRATED, f"no test shows fault {name}"


def test_faults_switch_in_process(vllm: FakeDeployment) -> None:
    assert vllm.set_faults(["done_missing", "nan_logprob", "done_missing"]) == (
        "done_missing",
        "nan_logprob",
    )
    assert vllm.faults == ("done_missing", "nan_logprob")
    with pytest.raises(ValueError, match="valid faults are"):
        vllm.set_faults(["no_such_fault"])
    assert vllm.faults == ("done_missing", "nan_logprob")  # unchanged on error
    with pytest.raises(ValueError, match="no_such_fault"):
        FakeDeployment("vllm", faults=["no_such_fault"])
