"""Starting a run's deployments on demand (and always stopping them): the preflight of each, what
it shows of itself, and the kill matrix's fakes. Which deployments a run tests is
`columns.plan_targets`."""

from __future__ import annotations

import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..client.breaker import origin
from ..client.http import Client
from ..client.refusals import CredentialsRefused
from ..errors import ConfigurationError, LaunchError, TransportError, WrongInput
from ..model import provenance
from ..model.comparability import NOT_AUTHORISED
from ..model.deployment import FLAGS, Naming
from ..model.prompts import (
    REFUSAL_STATUSES,
    SUITE_IDS,
    PromptSpace,
    ends_refused,
    stated_context_window,
)
from ..model.releases import DOCKER_CONFIG_SOURCE, FLAG_SOURCE, OBSERVED_SOURCE
from ..model.target import Launcher, Target
from ..model.verdict import Inconclusive
from ..wire.exchange import Exchange
from . import FakeLauncher
from .inputs import check_target, unreached_kind
from .refusals import refuse
from .worker_ids import check_worker_ids

LAUNCHER_SOURCE = "launcher (what it started, not read from the deployment)"
STARTED_HERE = frozenset({"fake", "dynamo"})
"""The kinds of target the run starts on this machine's loopback."""
PREFLIGHT_DEADLINE_S = 5.0
PREFLIGHT_AT_ONCE = 8
"""Planes the preflight asks at once."""
VERSION_WORKERS = 8
"""Workers whose system server `/metrics` is read for versions (discovery may list thousands)."""


@dataclass
class TargetPool:
    """Launchers by target id; each is started at most once, on first use, and stopped at the end.
    A launch failure is remembered, so every test of that target reports the same error (a wrong
    input as `WrongInput`, with what showed it)."""

    launchers: dict[str, Launcher]
    started: dict[str, Target] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    wrong_inputs: dict[str, tuple[object, ...]] = field(default_factory=dict)
    """Target id -> the evidence of the wrong input its failure is (`inputs.check_target`)."""
    retired: dict[str, Target] = field(default_factory=dict)
    namings: dict[str, Naming] = field(default_factory=dict)
    """Target id -> how messages name its inputs (a targets file's table; the flags else)."""
    kinds: dict[str, str] = field(default_factory=dict)
    """Target id -> what kind of cause its failure is (`comparability.TARGET_CAUSES`)."""
    named_workers: dict[str, frozenset[int]] = field(default_factory=dict)
    """Target id -> the instance ids mutating calls may target there (`--worker`, a table's
    `workers`), checked against what discovery lists (`worker_ids.check_worker_ids`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ids(self) -> list[str]:
        return list(self.launchers)

    def prepare(self, stack: contextlib.ExitStack) -> None:
        """Each launcher's work shared by its deployments, once (`Launcher.prepare`); what it
        leaves running stops when `stack` closes."""
        for launcher in self.launchers.values():
            launcher.prepare(stack)

    def get(self, target_id: str, client: Client) -> Target:
        with self._lock:
            if target_id in self.failures:
                raise self._failure(target_id)
            if target_id not in self.started:
                refused_before = set(client.breaker.refusals())
                naming = self.namings.get(target_id, FLAGS)
                target: Target | None = None
                try:
                    target = self.launchers[target_id].start()
                    for key in target.versions:
                        target.version_sources.setdefault(key, LAUNCHER_SOURCE)
                    reach(target, client)
                    preflight(target, client)
                    if target.unreached:  # no test of a target not reached runs at all
                        raise LaunchError(target.unreached.removeprefix(f"{target_id}: "))
                    deadline = min(PREFLIGHT_DEADLINE_S, client.deadline_s)
                    check_target(target, client, deadline, naming)
                    resolve_model(target, client)
                    took = preflight_generation(target, client)
                    workers = record_topology(target, client)
                    named = self.named_workers.get(target_id, frozenset())
                    check_worker_ids(target, client, workers, named, naming)
                    preflight_workers(target, client, workers)
                    record_prompt_space(target, client, took)
                    record_versions(target, client, workers)
                    refused = client.breaker.refusals()
                    refuse(  # a plane that refused its credentials: none of it is judged
                        [
                            error
                            for key, error in refused.items()
                            if key not in refused_before and isinstance(error, CredentialsRefused)
                        ],
                        client.credentials,
                    )
                except (LaunchError, ConfigurationError) as exc:
                    self.failures[target_id] = f"{target_id}: {exc}"
                    if isinstance(exc, WrongInput):
                        self.wrong_inputs[target_id] = exc.evidence
                    self.kinds[target_id] = unreached_kind(exc)
                    if target is not None:  # reported as given
                        target.notes.append(self.failures[target_id])
                        target.unreached = self.failures[target_id]
                        target.unreached_kind = self.kinds[target_id]
                        self.retired[target_id] = target
                    raise self._failure(target_id) from exc
                self.started[target_id] = target
            return self.started[target_id]

    def _failure(self, target_id: str) -> LaunchError | WrongInput:
        if target_id in self.wrong_inputs:
            return WrongInput(self.failures[target_id], self.wrong_inputs[target_id])
        return LaunchError(self.failures[target_id])

    def planned_targets(self) -> list[Target]:
        """Started targets, plus placeholders for those never started (for the report)."""
        found = []
        for target_id, launcher in self.launchers.items():
            if target_id in self.started or target_id in self.retired:
                found.append(self.started.get(target_id) or self.retired[target_id])
            else:
                note = self.failures.get(target_id, "not started")
                found.append(
                    Target(
                        id=target_id,
                        backend=launcher.backend,
                        kind=launcher.kind,
                        frontend_url="",
                        notes=[note],
                        unreached=self.failures.get(target_id),
                        unreached_kind=self.kinds.get(target_id),
                    )
                )
        return found

    def reached_targets(self) -> list[Target]:
        """The targets this process started or failed to start (what a parallel run's worker
        reports: the others belong to other workers)."""
        reached = set(self.started) | set(self.retired) | set(self.failures)
        return [target for target in self.planned_targets() if target.id in reached]

    def release(self, target_id: str, client: Client | None = None) -> None:
        """Stop one target once its last test ran; it is relaunched if a test needs it again.
        The planes the breaker opened go into the target's notes (a plane that refused the
        run's credentials leaves the target not reached), then the breaker forgets them: the
        next target may reuse the ports."""
        with self._lock:
            launcher = self.launchers.get(target_id)
            if launcher is None or target_id not in self.started:
                return
            target = self.started[target_id]
            if client is not None:
                for why in client.breaker.opened().values():
                    if f"plane down: {why}" not in target.notes:
                        target.notes.append(f"plane down: {why}")
                for error in client.breaker.refusals().values():
                    if isinstance(error, CredentialsRefused) and not target.unreached:
                        # credentials refused mid-run (a token that expired): what the run
                        # judged after says nothing of the deployment
                        target.unreached = f"{target_id}: {error}"
                        target.unreached_kind = NOT_AUTHORISED
                client.breaker.clear()
            try:
                launcher.stop()
            finally:
                self.retired[target_id] = self.started.pop(target_id)

    def stop_all(self) -> None:
        for launcher in self.launchers.values():
            try:
                launcher.stop()
            except Exception:
                continue


def reach(target: Target, client: Client) -> None:
    """A deployment started on this machine (our fakes, a launched Dynamo) is reached directly,
    whatever proxy the environment names; any other target's notes say how it is reached."""
    if target.kind in STARTED_HERE:
        for url in (target.frontend_url, target.rl_url or "", *target.worker_urls):
            client.network.reach_directly(url)
        return
    target.notes.extend(note for note in client.network.notes() if note not in target.notes)


def preflight(target: Target, client: Client) -> None:
    """Ask each plane once, with a short deadline, before any test: a plane that does not answer
    (no complete response, a reset, an oversized body) is opened in the client's breaker, so its
    tests report `error` at once while the other planes are tested (one that refuses the
    suite's credentials, 401 or 403, is refused there: see `TargetPool.get`). The planes are
    asked at once: planes that do not answer cost one preflight deadline, not one each."""
    deadline = min(PREFLIGHT_DEADLINE_S, client.deadline_s)
    probes = [("frontend", target.url("/v1/models"))]
    if target.rl_url:
        probes.append(("RL listener", target.rl("/v1/rl/workers")))
    probes += [("worker system server", f"{url.rstrip('/')}/health") for url in target.worker_urls]

    def ask(url: str) -> Exchange | None:
        try:
            return client.get(url, deadline_s=deadline)
        except TransportError:
            return None  # already known to be down

    with ThreadPoolExecutor(max_workers=min(PREFLIGHT_AT_ONCE, len(probes))) as pool:
        answers = list(pool.map(ask, [url for _, url in probes]))
    for (plane, url), exchange in zip(probes, answers, strict=True):
        if exchange is not None and exchange.error is not None:
            reason = f"preflight GET {url} ({plane}): {exchange.error}"
            client.breaker.trip(url, reason)
            target.notes.append(f"plane down: {origin(url)} is unavailable: {reason}")
            given = plane == "RL listener" and target.kind == "external"
            if (plane == "frontend" or given) and not target.unreached:
                # every test starts at the frontend; an RL listener given by URL that does not
                # answer is a wrong port or a listener not enabled as much as one that is down
                target.unreached = f"{target.id}: the {plane} did not answer: {reason}"


def preflight_workers(target: Target, client: Client, workers: list[dict[str, Any]]) -> None:
    """The system server of the first worker discovery lists (one not given by URL, which the
    preflight asked), asked once: a 401 or 403 leaves the target unreached, as on any plane.
    Only for a deployment given by URL: one the suite launched asks for no credentials."""
    given = {url.rstrip("/") for url in target.worker_urls}
    listed = [
        str(worker["system_url"]).rstrip("/")
        for worker in workers
        if isinstance(worker.get("system_url"), str)
    ]
    first = next((url for url in listed if url not in given), None)
    if target.kind != "external" or first is None:
        return
    with contextlib.suppress(TransportError):  # a refusal stays in the breaker
        client.get(f"{first}/health", deadline_s=min(PREFLIGHT_DEADLINE_S, client.deadline_s))


def preflight_generation(target: Target, client: Client) -> Exchange | None:
    """One single-token completion with the run's full deadline: a frontend that lists models
    but cannot generate (a wedged engine) is opened in the breaker before dozens of tests each
    wait a deadline for it. Slowness within the deadline is not a failure. Its prompt is the two
    ends of the ids the suite's prompts use (`prompts.SUITE_IDS`): its answer tells whether the
    deployment takes them (`record_prompt_space`)."""
    if not target.model:
        return None
    url = target.url("/v1/completions")
    prompt = [SUITE_IDS[0], SUITE_IDS[-1]]
    body = {"model": target.model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
    try:
        exchange = client.post(url, body)
    except TransportError:
        return None
    if exchange.error is not None:
        reason = f"preflight POST {url} (one token): {exchange.error}"
        client.breaker.trip(url, reason)
        target.notes.append(f"plane down: {origin(url)} is unavailable: {reason}")
    elif exchange.status == 200:
        try:
            observed = provenance.from_completion(exchange.json())
        except ValueError:
            observed = []
        _observe(target, observed)
    return exchange


def record_prompt_space(target: Target, client: Client, preflight: Exchange | None) -> None:
    """What the deployment shows of the prompts it takes (`prompts.PromptSpace`), kept in the
    target's topology: the context window `/v1/models` states, and whether the preflight
    completion of the suite's ids was refused for its content (then one more single-token
    completion, of the range's lowest id alone, tells a small vocabulary from a deployment that
    refuses token prompts)."""
    window = None
    try:
        models = client.get(
            target.url("/v1/models"), deadline_s=min(PREFLIGHT_DEADLINE_S, client.deadline_s)
        )
        window = stated_context_window(models.json(), target.model)
    except (TransportError, ValueError):
        pass
    refused = None
    if preflight is not None and preflight.status in REFUSAL_STATUSES:
        body = json.loads(preflight.request.body or b"{}")
        try:
            low = client.post(preflight.request.url, {**body, "prompt": [SUITE_IDS[0]]})
        except (TransportError, Inconclusive):  # a plane down, or a budget spent: not known
            low = None
        low_status = None if low is None else low.status
        refused = ends_refused(preflight.status, preflight.body_preview(), low_status)
    target.topology["prompts"] = PromptSpace(window, refused).describe()


def record_topology(target: Target, client: Client) -> list[dict[str, Any]]:
    """What the deployment shows of itself, for the environment record: the workers discovery
    lists (count, world sizes, namespaces, models), the frontend's registered instances (their
    components; a `prefill` component means disaggregated serving) and the workers given by URL.
    Read once, with a short deadline; what cannot be read is said, never guessed. Returns the
    workers discovery listed."""
    topology: dict[str, Any] = {"workers_given_by_url": len(target.worker_urls)}
    workers: list[dict[str, Any]] = []
    if target.rl_url:
        try:
            listing = client.get(
                target.rl("/v1/rl/workers"), deadline_s=min(PREFLIGHT_DEADLINE_S, client.deadline_s)
            )
            workers = [
                w for w in (listing.json() or {}).get("workers") or [] if isinstance(w, dict)
            ]
        except (TransportError, ValueError, AttributeError) as exc:
            topology["discovery"] = f"unreadable: {exc}"
        else:
            topology["discovered_workers"] = len(workers)
            topology["world_sizes"] = sorted(
                {w["world_size"] for w in workers if "world_size" in w}
            )
            topology["namespaces"] = sorted({str(w.get("namespace")) for w in workers})
            topology["models"] = sorted({str(w["model"]) for w in workers if w.get("model")})
            topology["workers_with_error"] = sum(1 for w in workers if w.get("error"))
    try:
        health = client.get(
            target.url("/health"), deadline_s=min(PREFLIGHT_DEADLINE_S, client.deadline_s)
        ).json()
        instances = health.get("instances") if isinstance(health, dict) else None
    except (TransportError, ValueError):
        instances = None
    if isinstance(instances, list):
        components = sorted(
            {
                str(i.get("component"))
                for i in instances
                if isinstance(i, dict) and i.get("component")
            }
        )
        topology["frontend_components"] = components
        topology["disaggregated"] = any("prefill" in c for c in components)
    else:
        topology["disaggregated"] = None  # the frontend's /health lists no instances
    target.topology = topology
    return workers


def record_versions(
    target: Target, client: Client, workers: list[dict[str, Any]] | None = None
) -> None:
    """The versions the deployment publishes (`provenance`), each with where it was read: the
    frontend's `/openapi.json`, `/v1/models` and `/metrics`, and the `/metrics` of the first
    `VERSION_WORKERS` workers' system servers (listed by discovery, or given by URL). Read-only,
    once, each request under the preflight deadline; what is absent or unreadable records
    nothing and fails nothing. (The completion's `system_fingerprint` is read from the preflight
    generation.)"""
    deadline = min(PREFLIGHT_DEADLINE_S, client.deadline_s)

    def read(url: str) -> Any:
        """The 200 body of a GET, as text; None for anything else."""
        try:
            exchange = client.get(url, deadline_s=deadline)
        except TransportError:
            return None
        if exchange.error is not None or exchange.status != 200:
            return None
        return exchange.body.decode("utf-8", errors="replace")

    def read_json(url: str) -> Any:
        text = read(url)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    _observe(target, provenance.from_openapi(read_json(target.url("/openapi.json"))))
    _observe(target, provenance.from_models(read_json(target.url("/v1/models")), target.model))
    frontend = read(target.url("/metrics"))
    if frontend is not None:
        scrape = [(target.frontend_url.rstrip("/"), frontend)]
        _observe(target, provenance.from_scrapes(scrape, "frontend", "frontend"))
    system_urls = [
        w["system_url"].rstrip("/") for w in workers or [] if isinstance(w.get("system_url"), str)
    ]
    system_urls += [url.rstrip("/") for url in target.worker_urls]
    scrapes = []
    for url in list(dict.fromkeys(system_urls))[:VERSION_WORKERS]:
        text = read(f"{url}/metrics")
        if text is not None:
            scrapes.append((url, text))
    _observe(target, provenance.from_scrapes(scrapes, "worker", "worker system server"))
    observe_release(target)


def observe_release(target: Target) -> None:
    """The release the deployment publishes (`dynamo`: the Dynamo frontend's OpenAPI version)
    is what the target runs, whatever the launcher or --dynamo-release said; a declared release
    it contradicts is kept in the notes."""
    observed = target.versions.get("dynamo")
    if observed is None or target.version_sources.get("dynamo") == LAUNCHER_SOURCE:
        return
    declared_by = {FLAG_SOURCE: "--dynamo-release", DOCKER_CONFIG_SOURCE: "dynamo_release"}
    if target.release_source in declared_by and target.release != observed:
        target.notes.append(
            f"{declared_by[target.release_source]} {target.release} was declared; the deployment "
            f"publishes {observed} ({target.version_sources.get('dynamo')}), which the report uses"
        )
    target.release, target.release_source = observed, OBSERVED_SOURCE


def _observe(target: Target, observed: list[provenance.Observed]) -> None:
    for item in observed:
        target.observe(item.key, item.value, item.source)


def resolve_model(target: Target, client: Client) -> None:
    """Fill `target.model` from `/v1/models` when not given: the one model listed, or an error.
    A frontend that is down leaves it unset: its tests report the plane, not the model."""
    if target.model:
        return
    try:
        exchange = client.get(target.url("/v1/models"), deadline_s=10)
    except TransportError:
        return
    if exchange.status != 200:
        raise LaunchError(
            f"GET {target.url('/v1/models')} answered "
            f"{exchange.status or exchange.error}; cannot choose a model (use --model)"
        )
    try:
        data = exchange.json().get("data", [])
        names = [entry["id"] for entry in data]
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise LaunchError(f"/v1/models body unusable ({exc}): {exchange.body_preview()}") from exc
    if not names:
        raise LaunchError(
            f"GET {target.url('/v1/models')} lists no model: the frontend serves none yet (no "
            "worker registered?); start one, or wait until it is listed"
        )
    if len(names) != 1:
        listed = ", ".join(map(str, names))
        raise ConfigurationError(
            f"/v1/models lists {len(names)} models ({listed}); choose one with --model"
        )
    target.model = names[0]


FAULTS_PER_SHARD = 8
"""How many ordinary faults one kill-matrix shard holds; a slow fault fills a shard alone."""


def fault_shards(count: int) -> list[tuple[str, ...]]:
    """The faults of the kill matrix's shards 1 .. count-1 (shard 0 holds the clean fakes): each
    fault to the least-loaded shard, slow faults first (each weighing a whole shard), so a slow
    fault shares its shard with as few others as the count allows and the shards holding them
    start first."""
    from fake_backends import FAULTS

    shards: list[list[str]] = [[] for _ in range(max(1, count - 1))]
    loads = [0] * len(shards)
    ordered = sorted(FAULTS.values(), key=lambda fault: (not fault.slow, fault.name))
    for fault in ordered:
        lightest = loads.index(min(loads))
        shards[lightest].append(fault.name)
        loads[lightest] += FAULTS_PER_SHARD if fault.slow else 1
    return [tuple(shard) for shard in shards]


def fault_shard_count() -> int:
    """Shards for a parallel kill matrix: the clean fakes' and enough for every fault."""
    from fake_backends import FAULTS

    weight = sum(FAULTS_PER_SHARD if fault.slow else 1 for fault in FAULTS.values())
    return 1 + -(-weight // FAULTS_PER_SHARD)


def fault_matrix_pool(
    workers: int, shard: tuple[int, int] | None = None, log_dir: Path | None = None
) -> TargetPool:
    """One clean fake per deployment that has a fault, and one fake per named fault, on the first
    fake deployment the fault applies to (vLLM preferred: it has the widest surface). A shard
    (index, count) of two or more holds the clean fakes alone at index 0 and the faults
    `fault_shards(count)` gives it elsewhere: the clean fakes run once, not once per shard (the
    merged matrix compares each fault with them). The fakes log to `log_dir` (a run's report
    directory)."""
    from fake_backends import FAULTS

    from ..model.killmatrix import fault_target_id

    split = shard is not None and shard[1] > 1
    clean_only = split and shard is not None and shard[0] == 0
    mine = set(fault_shards(shard[1])[shard[0] - 1]) if split and not clean_only else None
    launchers: dict[str, Launcher] = {}
    for name, fault in sorted(FAULTS.items()):
        flavour = "vllm" if "vllm" in fault.applies_to else sorted(fault.applies_to)[0]
        if not split or clean_only:
            clean = FakeLauncher(flavour, workers=workers, log_dir=log_dir)
            launchers.setdefault(clean.target_id, clean)
        if clean_only or (mine is not None and name not in mine):
            continue
        faulty = FakeLauncher(
            flavour,
            workers=workers,
            faults=(name,),
            target_id=fault_target_id(flavour, name),
            log_dir=log_dir,
        )
        launchers[faulty.target_id] = faulty
    return TargetPool(launchers)
