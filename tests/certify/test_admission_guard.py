"""The runtime admission guard: each rule named by the field it protects."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from rl_conformance.admission import AdmissionError, admit_sample

IDS = (5, 6, 7)
LOGPROBS = (-0.5, -1.25, 0.0)


def test_a_verified_sample_is_admitted() -> None:
    admit_sample(
        IDS,
        LOGPROBS,
        "length",
        prompt_ids=(1, 2),
        prompt_logprobs=(None, -3.0),
        model="m",
        expected_model="m",
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"token_ids": ()}, "token_ids"),
        ({"logprobs": (-0.5, -1.0)}, "logprobs"),
        ({"logprobs": (-0.5, None, -1.0)}, "logprobs[1]"),
        ({"logprobs": (-0.5, math.nan, -1.0)}, "logprobs[1]"),
        ({"logprobs": (-0.5, 0.25, -1.0)}, "logprobs[1]"),
        ({"token_ids": (5, "6", 7)}, "token_ids[1]"),
        ({"token_ids": (5, -6, 7)}, "token_ids[1]"),
        ({"token_ids": (5, 6.0, 7)}, "token_ids[1]"),
        ({"logprobs": (-0.5, "x", -1.0)}, "logprobs[1]"),
        ({"logprobs": (-0.5, -math.inf, -1.0)}, "logprobs[1]"),
        ({"finish_reason": None}, "finish_reason"),
        ({"finish_reason": "abort"}, "finish_reason"),
        ({"prompt_ids": (1, 2, 3), "prompt_logprobs": (-1.0, -2.0)}, "prompt_logprobs"),
        ({"prompt_ids": (1, 2), "prompt_logprobs": (-1.0, -2.0)}, "prompt_logprobs[0]"),
        ({"prompt_logprobs": (None,)}, "prompt_ids"),
        ({"model": "other", "expected_model": "m"}, "model"),
    ],
)
def test_each_violation_names_its_field(kwargs: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {
        "token_ids": IDS,
        "logprobs": LOGPROBS,
        "finish_reason": "stop",
    }
    arguments.update(kwargs)
    with pytest.raises(AdmissionError) as raised:
        admit_sample(**arguments)  # type: ignore[arg-type]
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: expected ")


def test_the_guard_and_the_protocol_import_without_the_harness_dependencies() -> None:
    """A trainer calls the guard in its hot loop and implements the protocol in its own tests:
    neither may drag in the harness (HTTP client, schemas, web servers, docker)."""
    heavy = ("docker", "starlette", "uvicorn", "httpx", "jsonschema", "hypothesis", "pytest")
    code = (
        "import sys\n"
        f"for name in {heavy!r}:\n"
        "    sys.modules[name] = None\n"
        "import rl_conformance.admission, rl_conformance.certify.protocol\n"
        "from rl_conformance.certify import Sample, RolloutAdapter\n"
        "print(sorted(m for m in sys.modules if m.startswith('rl_conformance')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(
        [
            "rl_conformance",
            "rl_conformance.admission",
            "rl_conformance.certify",
            "rl_conformance.certify.protocol",
            "rl_conformance.version",
        ]
    )
