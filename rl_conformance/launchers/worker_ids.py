"""`--worker ID`: the instance ids a run may change, checked against the deployment before any
test. An id no worker of the deployment has (a typo, a worker that restarted under a new id)
would leave every mutating test skipped while the run exits 0; the preflight refuses it
instead, naming the ids discovery lists (`WrongInput`: exit 2).

Only what the deployment shows for certain is held against the user: a discovery that lists no
worker (one still starting), an id that is not an integer, or a worker given by `--worker-url`
whose id its metrics do not name leaves the ids unchecked."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from ..client.http import Client
from ..errors import TransportError, WrongInput
from ..model.deployment import FLAGS, Naming
from ..model.target import Target
from ..wire import prometheus
from .inputs import evidence

LISTED_SHOWN = 10
METRICS_DEADLINE_S = 5.0


def check_worker_ids(
    target: Target,
    client: Client,
    workers: list[dict[str, Any]],
    named: Iterable[int],
    naming: Naming = FLAGS,
) -> None:
    """Raise `WrongInput` when a `--worker` id (a table's `workers`) is not among the workers
    of a deployment given by URL (`workers`: what discovery lists, read by
    `plan.record_topology`)."""
    wanted = sorted(set(named))
    if not wanted or target.kind != "external" or not workers:
        return
    listed = [worker.get("instance_id") for worker in workers]
    given = [_published_id(client, url) for url in target.worker_urls]
    known = [*listed, *given]
    if not all(isinstance(found, int) and not isinstance(found, bool) for found in known):
        return  # an id the deployment does not state as an integer: nothing certain to compare
    missing = [instance for instance in wanted if instance not in known]
    if not missing:
        return
    url = target.rl("/v1/rl/workers")
    ids = ", ".join(str(found) for found in listed[:LISTED_SHOWN])
    if len(listed) > LISTED_SHOWN:
        ids += f" (and {len(listed) - LISTED_SHOWN} more)"
    if any(given):
        ids += f"; the {naming.key('worker_url')} workers' metrics name " + ", ".join(
            map(str, given)
        )
    close = [
        match
        for instance in missing
        for match in difflib.get_close_matches(str(instance), map(str, known), n=1, cutoff=0.8)
    ]
    flag = naming.key("worker")
    hint = f"; did you mean {' '.join(naming.give('worker', found) for found in close)}?"
    which = ", ".join(map(str, missing))
    verb = "is not a worker" if len(missing) == 1 else "are not workers"
    message = (
        f"{naming.at('worker')} {which} {verb} of this deployment (give {flag} with an id "
        f"discovery lists, or {naming.give('all_workers')}{hint if close else ''}): GET {url} "
        f"lists {ids}"
    )
    raise WrongInput(message, _evidence(client, url, message))


def _published_id(client: Client, system_url: str) -> int | None:
    """The id a worker given by URL publishes in its metrics (as `fleet.resolve_workers` reads
    it), or None."""
    try:
        exchange = client.get(f"{system_url.rstrip('/')}/metrics", deadline_s=METRICS_DEADLINE_S)
    except TransportError:
        return None
    if exchange.status != 200:
        return None
    text = exchange.body.decode("utf-8", errors="replace")
    return prometheus.worker_instance_id(prometheus.parse(text))


def _evidence(client: Client, url: str, message: str) -> tuple[object, ...]:
    try:
        exchange = client.get(url, deadline_s=METRICS_DEADLINE_S)
    except TransportError:
        return ()
    return (evidence("input.worker", message, exchange),)
