"""What a deployment tells of its own software versions, and where each value was read.

A report claims only what it observed: every value here comes from something any deployment
publishes read-only, and carries its source (the plane, the request, the field or series):

- the frontend's `GET /openapi.json` `info.version` (the real Dynamo 1.6.1 frontend titles it
  "NVIDIA Dynamo OpenAI Frontend" and versions it 1.6.1: the one place 1.6.1 names its version);
- `system_fingerprint` of a completion (vLLM's own server writes `vllm-<version>-...`; the Dynamo
  1.6.1 frontend writes null);
- the target model's entry in `GET /v1/models` (`owned_by`, any version field);
- Prometheus `/metrics` of the frontend and of the workers' system servers: any label naming a
  version on any series, and the build labels (revision, commit, branch, git_*) of a
  `*_build_info` series. Dynamo 1.6.1 publishes none; vLLM's `vllm:*_info` series
  (`vllm:cache_config_info`, `vllm:lora_requests_info`) carry configuration, not versions.

Absent or unreadable evidence gives nothing, never a guess and never an error. Pure: no I/O
(`plan.record_versions` does the reading). Values are cut to `MAX_VALUE_CHARS` and a scrape gives
at most `MAX_KEYS` keys, so a deployment cannot flood the report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..wire import prometheus

MAX_VALUE_CHARS = 200
MAX_KEYS = 32
MAX_VALUES_PER_KEY = 4
DYNAMO_TITLE = "NVIDIA Dynamo"
"""How the real Dynamo frontend's OpenAPI title starts (1.6.1: "NVIDIA Dynamo OpenAI Frontend")."""
_VLLM_FINGERPRINT = re.compile(r"^vllm-(\d[^\s-]*)(?:-|$)")
"""vLLM's `system_fingerprint`: `vllm-<version>[-<parallelism>]-<hash8>` (its modes full, hash)."""
_BUILD_LABEL = re.compile(r"version|revision|commit|branch|^git", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Observed:
    """One value a deployment published: `key` (what it is), `value`, `source` (where it was
    read, as a reader can read it again)."""

    key: str
    value: str
    source: str


def clean(value: Any) -> str:
    """A published value as one bounded line of text."""
    text = _CONTROL.sub(" ", str(value)).strip()
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def from_openapi(document: Any, plane: str = "frontend") -> list[Observed]:
    """`info.version` of an OpenAPI document: `dynamo` when the title is Dynamo's frontend's,
    `<plane>.openapi` for any other API."""
    info = document.get("info") if isinstance(document, Mapping) else None
    if not isinstance(info, Mapping):
        return []
    version = info.get("version")
    if not isinstance(version, str | int | float) or isinstance(version, bool):
        return []
    if not clean(version):
        return []
    title = info.get("title")
    titled = f' (info.title "{clean(title)}")' if isinstance(title, str) and title else ""
    key = (
        "dynamo"
        if isinstance(title, str) and title.startswith(DYNAMO_TITLE)
        else f"{plane}.openapi"
    )
    return [Observed(key, clean(version), f"{plane} GET /openapi.json info.version{titled}")]


def from_completion(document: Any, route: str = "/v1/completions") -> list[Observed]:
    """`system_fingerprint` of a completion: vLLM's version when it is vLLM's format, else the
    fingerprint itself. Null or absent: nothing."""
    if not isinstance(document, Mapping):
        return []
    fingerprint = document.get("system_fingerprint")
    if not isinstance(fingerprint, str) or not clean(fingerprint):
        return []
    shown = clean(fingerprint)
    source = f"frontend POST {route} system_fingerprint"
    match = _VLLM_FINGERPRINT.match(fingerprint)
    if match:
        return [Observed("vllm", clean(match.group(1)), f'{source} "{shown}"')]
    return [Observed("system_fingerprint", shown, source)]


def from_models(document: Any, model: str | None) -> list[Observed]:
    """The model's entry in `/v1/models` (the one listed when no model is named): `owned_by` and
    any field naming a version or revision."""
    data = document.get("data") if isinstance(document, Mapping) else None
    if not isinstance(data, list):
        return []
    entries = [entry for entry in data if isinstance(entry, Mapping)]
    if model is not None:
        entries = [entry for entry in entries if entry.get("id") == model]
    if len(entries) != 1:
        return []
    entry = entries[0]
    where = f'frontend GET /v1/models data[id="{clean(entry.get("id"))}"]'
    found = []
    for field_name, value in entry.items():
        name = str(field_name)
        wanted = name == "owned_by" or re.search("version|revision", name, re.IGNORECASE)
        if not wanted or isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        if clean(value):
            found.append(Observed(f"model.{clean(name)}", clean(value), f"{where}.{name}"))
    return found[:MAX_KEYS]


def version_labels(name: str, labels: Mapping[str, str]) -> list[tuple[str, str]]:
    """The labels of one series that name a software version: any label with "version" in its
    name (a weight version is the model's, not the software's, and is left out), and on a
    `*_build_info` series its build labels too."""
    build = name.endswith("build_info")
    found = []
    for label, value in labels.items():
        lowered = label.lower()
        if "weight" in lowered or not clean(value):
            continue
        if "version" in lowered or (build and _BUILD_LABEL.search(lowered)):
            found.append((label, value))
    return found


def from_metrics(text: str, plane: str) -> dict[str, list[str]]:
    """`<plane>.<series>.<label>` -> the distinct values of that label in one scrape (at most
    `MAX_VALUES_PER_KEY`, at most `MAX_KEYS` keys)."""
    found: dict[str, list[str]] = {}
    for sample in prometheus.parse(text):
        for label, value in version_labels(sample.name, sample.labels):
            key = f"{plane}.{sample.name}.{label}"
            if key not in found and len(found) >= MAX_KEYS:
                continue
            values = found.setdefault(key, [])
            if clean(value) not in values and len(values) < MAX_VALUES_PER_KEY:
                values.append(clean(value))
    return found


def from_scrapes(scrapes: Iterable[tuple[str, str]], plane: str, what: str) -> list[Observed]:
    """Version labels of several scrapes of one plane (`(url, text)` each, e.g. every worker's
    system server): one key per series and label; a value several servers agree on is said
    once with every server named, values that differ are each said with their server."""
    by_key: dict[str, dict[str, list[str]]] = {}
    for url, text in scrapes:
        for key, values in from_metrics(text, plane).items():
            for value in values:
                by_key.setdefault(key, {}).setdefault(value, []).append(url)
    found = []
    for key, servers in list(by_key.items())[:MAX_KEYS]:
        series, label = key[len(plane) + 1 :].rsplit(".", 1)
        request = f"GET /metrics {series}{{{label}}}"
        if len(servers) == 1:
            [(value, urls)] = servers.items()
            found.append(Observed(key, value, f"{what} {', '.join(urls)} {request}"))
        else:
            each = "; ".join(f"{value} at {', '.join(urls)}" for value, urls in servers.items())
            found.append(Observed(key, ", ".join(servers), f"{what} {request}, differing: {each}"))
    return found
