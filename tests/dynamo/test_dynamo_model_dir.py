"""The model directory and the worker's command line, plus the real mocker on that directory.

* ``python -m fake_backends.model.directory`` runs with our environment (no ``tokenizers``);
* the HF ``tokenizers`` library of ``.venv-dynamo`` (the same Rust code the frontend uses)
  decodes and encodes exactly like ``fake_backends.model.tokenizer`` on random ids and texts;
* the worker's CLI (fault listing, exit 2 on an unknown fault) and its import isolation:
  inside the Dynamo environment it imports no starlette/uvicorn/httpx;
* Dynamo's own mocker serves the directory behind the real frontend, and the frontend's
  detokenization and chat template agree with ours there too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from dynamo_stack import Stack, stack_fixture

from fake_backends.faults.engine import ENGINE_FAULT_NAMES, catalogue_lines
from fake_backends.model.tokenizer import EOS_ID, VOCAB_SIZE, decode, encode, render_chat

ROOT = Path(__file__).resolve().parents[2]
mocker = stack_fixture("mocker")

FUZZ = r"""
import json, random, sys
sys.path.insert(0, sys.argv[2])
from tokenizers import Tokenizer
from fake_backends.model import tokenizer as T
tok = Tokenizer.from_file(sys.argv[1])
rng = random.Random(0)
bad = []
for _ in range(2000):
    ids = [rng.randrange(0, T.VOCAB_SIZE) if rng.random() < 0.7 else rng.randrange(0, 263)
           for _ in range(rng.randrange(1, 24))]
    if tok.decode(ids, skip_special_tokens=True) != T.decode(ids):
        bad.append(["decode", ids])
chars = "abcdefghijklmnopqrstuvwxyz ,.!?:;-\n\tXYZ09\u00e9\u65e5"
for _ in range(3000):
    text = "".join(rng.choice(chars) for _ in range(rng.randrange(0, 60)))
    if tok.encode(text).ids != T.encode(text):
        bad.append(["encode", text])
long_text = T.decode([rng.randrange(263, T.VOCAB_SIZE) for _ in range(20000)])
if tok.encode(long_text).ids != T.encode(long_text):
    bad.append(["encode", "long"])
print(json.dumps(bad[:5]))
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("toy-model")
    done = subprocess.run(
        [sys.executable, "-m", "fake_backends.model.directory", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return directory


def test_model_dir_files(model_dir: Path) -> None:
    names = sorted(p.name for p in model_dir.iterdir())
    assert names == [
        "config.json",
        "generation_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    config = json.loads((model_dir / "config.json").read_text())
    assert config["vocab_size"] == VOCAB_SIZE > 2000
    assert json.loads((model_dir / "generation_config.json").read_text())["eos_token_id"] == [
        EOS_ID
    ]
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    assert len(tokenizer["model"]["vocab"]) == VOCAB_SIZE
    assert [t["id"] for t in tokenizer["added_tokens"]] == list(range(7))
    assert "chat_template" in json.loads((model_dir / "tokenizer_config.json").read_text())


def test_hf_tokenizers_agree_with_ours(dynamo_python: Path, model_dir: Path) -> None:
    done = subprocess.run(
        [str(dynamo_python), "-c", FUZZ, str(model_dir / "tokenizer.json"), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def _worker(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "fake_backends.dynamo.worker", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_worker_lists_engine_faults() -> None:
    done = _worker(sys.executable, "--list-engine-faults")
    assert done.returncode == 0
    assert done.stdout.splitlines() == catalogue_lines()


def test_worker_refuses_unknown_engine_fault(model_dir: Path) -> None:
    done = _worker(sys.executable, "--model-dir", str(model_dir), "--engine-fault", "bogus")
    assert done.returncode == 2
    assert "unknown engine fault(s): bogus" in done.stderr
    assert all(name in done.stderr for name in ENGINE_FAULT_NAMES)
    assert _worker(sys.executable, "--model-name", "toy").returncode == 2  # no --model-dir


def test_worker_imports_no_web_stack_in_the_dynamo_environment(dynamo_python: Path) -> None:
    probe = (
        "import sys; import fake_backends.dynamo.worker, fake_backends.model.directory; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'starlette', 'uvicorn', 'httpx', 'dynamo', 'fake_backends'}))"
    )
    done = subprocess.run(
        [str(dynamo_python), "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['fake_backends']"


def test_fake_backends_package_imports_lazily() -> None:
    probe = (
        "import sys, fake_backends; before = 'fake_backends.deployment.assembly' in sys.modules; "
        "fake_backends.FakeDeployment; after = 'fake_backends.deployment.assembly' in sys.modules; "
        "print(before, after, set(fake_backends.__all__) <= set(dir(fake_backends)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


def test_mocker_text_is_decode_of_its_ids(mocker: Stack) -> None:
    for seed in range(4):
        body = mocker.completion(
            prompt=[316, 276],
            max_tokens=12,
            seed=seed,
            nvext={"extra_fields": ["completion_token_ids"]},
        )
        ids = body["nvext"]["completion_token_ids"]
        assert ids and all(1000 <= t < 2000 for t in ids)
        assert body["choices"][0]["text"] == decode(ids)


def test_mocker_stream_text_is_decode_of_its_ids(mocker: Stack) -> None:
    events = mocker.stream(
        "/v1/completions",
        {
            "model": "toy",
            "prompt": [316],
            "max_tokens": 8,
            "stream": True,
            "nvext": {"extra_fields": ["completion_token_ids"]},
        },
    )
    chunks = [e for e in events[:-1] if e.get("choices")]
    ids = [t for e in chunks for t in e.get("nvext", {}).get("completion_token_ids", [])]
    assert "".join(e["choices"][0]["text"] for e in chunks) == decode(ids)


def test_mocker_prompts_are_tokenized_like_ours(mocker: Stack) -> None:
    messages = [{"role": "user", "content": "hello world"}]
    chat = mocker.post(
        "/v1/chat/completions",
        {
            "model": "toy",
            "messages": messages,
            "max_tokens": 2,
            "nvext": {"extra_fields": ["prompt_token_ids"]},
        },
    ).json()
    assert chat["nvext"]["prompt_token_ids"] == render_chat(messages)
    text = "ba ba, hello... ok!"
    body = mocker.completion(
        prompt=text, max_tokens=2, nvext={"extra_fields": ["prompt_token_ids"]}
    )
    assert body["nvext"]["prompt_token_ids"] == encode(text)
    assert mocker.http.get(mocker.rl + "/v1/rl/workers").json()["workers"] == []
