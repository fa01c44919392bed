"""A mutating call the run may not send names the flags that would allow it, never those the
user already gave."""

from __future__ import annotations

from rl_conformance.model.deployment import Deployment, Naming
from rl_conformance.model.mutations import MutationPolicy


def test_a_read_only_run_names_allow_mutations() -> None:
    said = str(MutationPolicy().refusal("pause_generation on worker 2"))
    assert said == (
        "read-only run: pause_generation on worker 2 not sent (use --allow-mutations with "
        "--worker INSTANCE_ID or --all-workers)"
    )


def test_a_run_allowed_on_other_workers_names_what_is_missing() -> None:
    policy = MutationPolicy(allowed=True, workers=frozenset({1}))
    assert not policy.permits(2)
    said = str(policy.refusal("pause_generation on worker 2"))
    assert said == (
        "mutations allowed on workers [1]: pause_generation on worker 2 not sent (add --worker "
        "with its id, or use --all-workers)"
    )
    assert "--allow-mutations" not in said


def test_a_table_allowed_on_other_workers_names_its_own_keys() -> None:
    table = Deployment(
        allow_mutations=True, worker=(1,), naming=Naming(file="targets.toml", table="prod")
    )
    said = str(MutationPolicy.of(table).refusal("pause_generation on worker 2"))
    assert said.endswith(
        "not sent (add its id to workers, or set all_workers = true, in targets.toml [prod])"
    )
