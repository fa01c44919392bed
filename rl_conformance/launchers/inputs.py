"""A user's mistake is never the deployment's failure: wrong inputs recognised before judging.

Two moments, each before any verdict:

- `check_config(config)`, before anything starts (what the inputs alone show, beyond the rules
  that tie flags together in `RunConfig.validate`): fault names against our fakes' catalogues,
  a fault no fake of the run can have. A `ConfigurationError`: exit 2, one message naming the
  input and the fix.
- `check_target(target, client, deadline_s)`, in the preflight, once a deployment given by URL
  answers: what it shows of itself contradicts what the user said. A `--frontend` that is not
  Dynamo's frontend (an HTML page, no `/v1/models`, a redirect; the RL listener given in its
  place; the frontend with a path such as `/v1`, as OpenAI base URLs are written), an `--rl-url`
  that is not Dynamo's RL listener (the frontend or its base URL given in its place, the
  listener with a path, a web server, another product's discovery body), a `--model` it does
  not serve, a `--backend` its discovery contradicts: `WrongInput`, one sentence naming the
  input and the fix, so no test of the target runs and the run exits 2 (the preflight refused
  it: `comparability.PREFLIGHT_REFUSED`). What the URLs answer was measured on the real Dynamo
  1.6.1: its frontend answers a path it does not serve with 404 and a JSON body ("Route not
  found"), its RL listener with 404 and an empty body.

Only what the user gave is checked, and only an answer no faithful deployment gives is held
against the user: a server error, a refusal (401/403, a client certificate refused) or a plane
that does not answer is the deployment's, and a frontend that lists no model yet is one still
starting (not reached). A deployment the suite launched (our fakes, `--launch`) is the
deployment, and what it answers is judged by the tests (a fake's fault is a failure).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from ..checks.discovery import foreign_listener, workers_of
from ..client.breaker import origin
from ..client.http import Client
from ..errors import ConfigurationError, LaunchError, TransportError, WrongInput
from ..model.comparability import NOT_AUTHORISED, NOT_REACHED, PREFLIGHT_REFUSED
from ..model.config import RunConfig
from ..model.deployment import FLAGS, Naming
from ..model.matrix import Evidence
from ..model.options import FAKES
from ..model.target import Target
from ..wire.exchange import BodyNotJSON, Exchange, shorten
from .fake import FLAVOURS
from .refusals import AuthRefused

FRONTEND_FIX = "give the URL of its OpenAI-compatible HTTP server, port 8000 by default"
LISTENER_FIX = "give the listener's URL, port 8001 by default, or leave {} out"
OWN_PORT = "give the RL listener's own URL: DYN_RL_PORT, port 8001 by default"
NOT_SERVED_STATUSES = frozenset({404, 405, 501})
"""Statuses that say a route is not served at all (as opposed to a server error)."""
BACKEND_ROUTES: dict[str, tuple[str, ...]] = {
    "vllm": ("resume_generation", "control/resume_generation", "control/is_paused"),
    "sglang": ("continue_generation",),
}
"""Administration routes only one backend's workers advertise: vLLM's Python worker resumes with
`resume_generation`, its native sidecar with `control/*`; SGLang resumes with
`continue_generation` ("Compare vLLM and SGLang Administration")."""
PREVIEW_CHARS = 80


# -- before anything starts ----------------------------------------------------------------------


def check_config(config: RunConfig) -> None:
    """Raise `ConfigurationError` for an input that is wrong whatever the deployment: a fault
    name our fakes do not have, a fault none of the run's fakes can have."""
    from fake_backends import FAULTS
    from fake_backends.faults.engine import ENGINE_FAULT_NAMES

    for name in config.fault:
        problem = unknown_name(
            "--fault", name, FAULTS, "our fakes have", "python -m fake_backends --list-faults"
        )
        if problem:
            raise ConfigurationError(problem)
    for name in config.engine_fault:
        problem = unknown_name("--engine-fault", name, ENGINE_FAULT_NAMES, "our toy engine has")
        if problem:
            raise ConfigurationError(problem)
    if config.fault and not config.fault_matrix:
        given = config.frontend or config.targets or config.launch
        fakes = config.fake or (() if given else FAKES)
        for name in config.fault:
            problem = inapplicable_fault(name, FAULTS[name].applies_to, fakes)
            if problem:
                raise ConfigurationError(problem)


def unknown_name(
    flag: str, name: str, known: Iterable[str], owner: str, lister: str | None = None
) -> str | None:
    """Why `name` is not one of `known` (with the closest names), or None. The known names are
    listed when few, else `lister` (a command) is named."""
    names = sorted(known)
    if name in names:
        return None
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    if lister is None or len(names) <= 20:
        where = f"the {len(names)} names are: {', '.join(names)}"
    else:
        where = f"`{lister}` lists the {len(names)} names"
    return f"{flag} {name}: {owner} no fault of that name{hint}; {where}"


def inapplicable_fault(name: str, applies_to: Iterable[str], fakes: Iterable[str]) -> str | None:
    """Why fault `name` would change nothing in a run of `fakes`, or None. A fault applies to a
    fake deployment named in `applies_to`, or whose backend is named there."""
    wanted = set(applies_to)
    fakes = tuple(fakes)
    if any(fake in wanted or FLAVOURS.get(fake, (fake,))[0] in wanted for fake in fakes):
        return None
    if not fakes:
        return (
            f"--fault {name} breaks one of our fakes, and this run tests none: add --fake "
            f"{sorted(wanted)[0]} (--fault does not change a deployment given by --frontend or "
            "--launch)"
        )
    return (
        f"--fault {name} applies to the fake(s) {', '.join(sorted(wanted))}, and this run "
        f"tests {', '.join(fakes)}: add --fake {sorted(wanted)[0]}"
    )


# -- once a deployment given by URL answers ------------------------------------------------------


def check_target(target: Target, client: Client, deadline_s: float, naming: Naming = FLAGS) -> None:
    """Compare what an external target shows with what the user said of it (see the module).
    Raises `WrongInput` for each input the deployment contradicts, `AuthRefused` for a client
    certificate an ingress refused (a credential, as a 401 is), and `LaunchError` for a model a
    frontend still starting does not list yet. A plane that does not answer is the preflight's,
    not an input's. `naming` names the inputs: the flags, or a targets file's table and keys."""
    if target.kind != "external":
        return
    whole: list[tuple[str, Evidence]] = []
    starting: str | None = None
    swapped = False
    models = _get(client, target.url("/v1/models"), deadline_s)
    refused = certificate_refusal(models, client.network.trust.client_cert)
    if models is not None and refused is not None:  # a credential refused: not authorised
        message = f"{naming.at('frontend')} {target.frontend_url}: {refused}"
        raise AuthRefused(message, (evidence("input.client_cert", message, models),))
    if models is not None:
        why = frontend_problem(models)
        if why is not None:
            message, swapped = frontend_mistake(client, target, why, deadline_s, naming)
            whole.append((message, evidence("input.frontend", message, models)))
        elif models.status == 200:
            served = served_models(_json(models))
            why = model_problem(target.model, served, target.url("/v1/models"), naming)
            if why is not None and not served:
                starting = why
            elif why is not None:
                whole.append((why, evidence("input.model", why, models)))
    if target.rl_url and not swapped:
        listing = _get(client, target.rl("/v1/rl/workers"), deadline_s)
        why = listener_problem(listing) if listing is not None else None
        refused = certificate_refusal(listing, client.network.trust.client_cert)
        if listing is not None and refused is not None:
            message = f"{naming.at('rl_url')} {target.rl_url}: {refused}"
            raise AuthRefused(message, (evidence("input.client_cert", message, listing),))
        if listing is not None and why is not None:
            message = rl_url_mistake(client, target, why, deadline_s, naming)
            whole.append((message, evidence("input.rl_url", message, listing)))
        elif listing is not None and listing.status == 200:
            why = backend_problem(target.backend, _json(listing), listing.request.url, naming)
            if why is not None:
                whole.append((why, evidence("input.backend", why, listing)))
    if whole:
        raise WrongInput("; and ".join(m for m, _ in whole), tuple(e for _, e in whole))
    if starting is not None:
        raise LaunchError(starting)


def frontend_mistake(
    client: Client, target: Target, why: str, deadline_s: float, naming: Naming = FLAGS
) -> tuple[str, bool]:
    """The sentence for a frontend URL that answered but is not a Dynamo frontend, naming what
    it is when the deployment shows it (the frontend with a path, the RL listener, the two URLs
    swapped), and whether the two URLs are swapped."""
    url, base = target.frontend_url, origin(target.frontend_url)
    at, key = naming.at("frontend"), naming.key("frontend")
    if _has_path(url) and _is_frontend(client, base, deadline_s):
        fix = f"give {key} {base}: the suite adds /v1/... itself"
        return f"{at} {url} is the frontend with a path ({fix}): {why}", False
    if _is_listener(client, url, deadline_s):
        rl_url = target.rl_url
        if rl_url and _is_frontend(client, origin(rl_url), deadline_s):
            fix = f"give {key} {rl_url} {naming.key('rl_url')} {url}"
            return (
                f"{at} {url} is Dynamo's RL listener and {naming.key('rl_url')} {rl_url} the "
                f"frontend: they are swapped ({fix}): {why}",
                True,
            )
        fix = (
            f"give the frontend's URL, port 8000 by default, and this one as {naming.key('rl_url')}"
        )
        return f"{at} {url} is Dynamo's RL listener, not its frontend ({fix}): {why}", False
    return f"{at} {url} is not a Dynamo frontend ({FRONTEND_FIX}): {why}", False


def rl_url_mistake(
    client: Client, target: Target, why: str, deadline_s: float, naming: Naming = FLAGS
) -> str:
    """The sentence for an RL URL that answered but is not Dynamo's RL listener, naming what it
    is when the deployment shows it: the listener with a path, the frontend's address or its
    OpenAI base URL (`/v1`), another frontend."""
    url = target.rl_url or ""
    base = origin(url)
    at = naming.at("rl_url")
    if _has_path(url) and _is_listener(client, base, deadline_s):
        fix = f"give {naming.key('rl_url')} {base}: the suite adds /v1/rl/workers itself"
        return f"{at} {url} is the RL listener with a path ({fix}): {why}"
    if base == origin(target.frontend_url):
        what = "OpenAI base URL" if urlsplit(url).path.rstrip("/").endswith("/v1") else "address"
        return f"{at} {url} is the frontend's {what}, not the RL listener's ({OWN_PORT}): {why}"
    if _is_frontend(client, base, deadline_s):
        return (
            f"{at} {url} is a frontend: it lists models at /v1/models, as the RL listener does "
            f"not ({OWN_PORT}): {why}"
        )
    return (
        f"{at} {url} is not Dynamo's RL listener "
        f"({LISTENER_FIX.format(naming.key('rl_url'))}): {why}"
    )


def unreached_kind(error: BaseException) -> str:
    """What kind of cause a target's failure to start is (`comparability.TARGET_CAUSES`): an
    input the preflight refused, credentials a plane refused, or a deployment not reached."""
    if isinstance(error, AuthRefused):
        return NOT_AUTHORISED
    if isinstance(error, ConfigurationError):
        return PREFLIGHT_REFUSED
    return NOT_REACHED


NOT_JSON = object()
CERTIFICATE_PAGES = {
    "No required SSL certificate was sent": False,
    "The SSL certificate error": True,
}
"""nginx's answers (HTTP 400) to a request without the client certificate it asks for (False)
and with one it refused (True): a certificate its CA did not sign, or revoked."""


def certificate_refusal(exchange: Exchange | None, client_cert: str | None) -> str | None:
    """What an ingress's refusal of the client certificate says for the user, or None. (A
    server that refuses one during the handshake is told by the client itself: `client.dial`.)"""
    if exchange is None or exchange.status not in (400, 495, 496):
        return None
    text = exchange.body[:4096].decode("utf-8", errors="replace")
    page, shown = next(((p, s) for p, s in CERTIFICATE_PAGES.items() if p in text), (None, None))
    if page is None:
        return None
    said = f"HTTP {exchange.status} {page!r}"
    if not shown or client_cert is None:
        return (
            f"the server asks for a client certificate and this run showed none ({said}): give "
            "--client-cert FILE (and --client-key FILE when the key is apart)"
        )
    return (
        f"the server refused the client certificate {client_cert} ({said}): it is not signed "
        "by a CA the server trusts for clients (its date is valid): give one that is"
    )


def answer_problem(exchange: Exchange, serves: str) -> tuple[str | None, Any]:
    """What every plane's first answer is read for: a redirect, a route not served (`serves`
    names what the URL should serve), an HTML page or a body that is not JSON is a problem;
    else (None, the parsed body), or (None, NOT_JSON) for an answer that is the deployment's
    own (no answer, a server error, a refusal)."""
    status = exchange.status
    if status is None:
        return None, NOT_JSON
    answered = f"GET {urlsplit(exchange.request.url).path} answered HTTP {status}"
    if 300 <= status < 400:
        where = exchange.headers.get("location") or "nowhere"
        return f"{answered}, a redirect to {where} (the suite follows no redirect)", NOT_JSON
    if status in NOT_SERVED_STATUSES:
        return f"{answered} ({describe_body(exchange)}): it serves no {serves}", NOT_JSON
    if not 200 <= status < 300:
        return None, NOT_JSON
    if is_html(exchange):
        return f"{answered} with an HTML page ({describe_body(exchange)})", NOT_JSON
    try:
        return None, exchange.json()
    except BodyNotJSON:
        return f"{answered} with a body that is not JSON ({describe_body(exchange)})", NOT_JSON


def frontend_problem(exchange: Exchange) -> str | None:
    """Why this answer to `GET /v1/models` shows a server that is not a Dynamo frontend (no
    model listing, an HTML page, a redirect, JSON of another shape), or None. A server error
    (5xx) or a refusal (401/403) is the deployment's answer, not a wrong URL."""
    problem, body = answer_problem(exchange, "model listing")
    if problem is not None or body is NOT_JSON:
        return problem
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return (
            f"GET {urlsplit(exchange.request.url).path} answered HTTP {exchange.status} with "
            f"JSON that is not a model listing (no `data` list): {describe_body(exchange)}"
        )
    return None


def listener_problem(exchange: Exchange) -> str | None:
    """Why this answer to `GET /v1/rl/workers` shows a server that is not Dynamo's RL listener
    (the route not served, an HTML page, a redirect, another product's worker list), or None. A
    Dynamo-shaped body that breaks the protocol (a version 2, a worker without routes) is the
    deployment's, judged by the discovery tests."""
    problem, body = answer_problem(exchange, "discovery")
    if problem is not None or body is NOT_JSON:
        return problem
    foreign = foreign_listener(body)
    if foreign is not None:
        return foreign
    if not isinstance(body, dict) or not ({"protocol_version", "workers"} & set(body)):
        return (
            f"GET {urlsplit(exchange.request.url).path} answered HTTP {exchange.status} with "
            "JSON that is not a discovery body (neither protocol_version nor workers): "
            f"{describe_body(exchange)}"
        )
    return None


def served_models(body: Any) -> list[str]:
    """The model ids of a `/v1/models` body (one whose `data` is a list)."""
    data = body.get("data") if isinstance(body, dict) else None
    return [str(entry["id"]) for entry in data or [] if isinstance(entry, dict) and "id" in entry]


def model_problem(
    model: str | None, served: list[str], listing_url: str, naming: Naming = FLAGS
) -> str | None:
    """Why `--model` names a model the frontend does not serve, or None (no `--model`: the one
    listed is chosen later)."""
    if model is None or model in served:
        return None
    if not served:
        return (
            f"{naming.at('model')} {model} is not served (start a worker for it, or wait until "
            "it is listed): "
            f"GET {listing_url} lists no model at all"
        )
    listed = ", ".join(served[:10]) + (
        f" (and {len(served) - 10} more)" if len(served) > 10 else ""
    )
    fix = (
        f"give {naming.give('model', served[0])}"
        if len(served) == 1
        else f"give {naming.key('model')} with one of them"
    )
    return f"{naming.at('model')} {model} is not served ({fix}): GET {listing_url} lists {listed}"


def backend_problem(
    backend: str, body: Any, listing_url: str, naming: Naming = FLAGS
) -> str | None:
    """Why `--backend` contradicts the administration routes discovery's workers advertise (route
    names only one backend has), or None."""
    seen: dict[str, set[str]] = {}
    for worker in workers_of(body):
        routes = worker.get("routes")
        if not isinstance(routes, list):
            continue
        for other, markers in BACKEND_ROUTES.items():
            hits = {route for route in routes if route in markers}
            if hits:
                seen.setdefault(other, set()).update(hits)
    if not seen or backend in seen:
        return None
    engines = sorted(seen)
    routes = ", ".join(sorted(set().union(*seen.values())))
    return (
        f"{naming.at('backend')} {backend} is contradicted by discovery (give "
        f"{naming.give('backend', engines[0])}): GET "
        f"{listing_url} lists workers advertising {' and '.join(engines)} administration routes "
        f"({routes}), which {backend} workers do not have"
    )


def is_html(exchange: Exchange) -> bool:
    head = exchange.body[:64].lstrip().lower()
    return "html" in exchange.content_type.lower() or head.startswith((b"<!doctype", b"<html"))


def describe_body(exchange: Exchange) -> str:
    """The body as a short phrase for a message: an HTML page by its text, anything else by
    its first characters (cut between words)."""
    if not exchange.body:
        return "an empty body"
    text = exchange.body[:4096].decode("utf-8", errors="replace")
    if is_html(exchange):
        words = re.sub(r"<[^>]*>", " ", re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text))
        return f"an HTML page: {shorten(words, PREVIEW_CHARS)!r}"
    return repr(shorten(text, PREVIEW_CHARS))


def evidence(check_id: str, message: str, exchange: Exchange) -> Evidence:
    """What showed a wrong input: the request, what came back, its reproducer and wire log."""
    return Evidence(
        check_id,
        message,
        "",
        "a Dynamo deployment as the flags describe it",
        f"HTTP {exchange.status}: {describe_body(exchange)}",
        exchange.curl(),
        exchange.wire_log(),
    )


def _json(exchange: Exchange) -> Any:
    try:
        return exchange.json()
    except BodyNotJSON:
        return None


def _get(client: Client, url: str, deadline_s: float) -> Exchange | None:
    """One GET under the preflight deadline; None when no HTTP answer came (the preflight has
    already said so for that plane)."""
    try:
        exchange = client.get(url, deadline_s=deadline_s)
    except TransportError:
        return None
    return exchange if exchange.error is None else None


def _is_frontend(client: Client, url: str, deadline_s: float) -> bool:
    """Whether `url` lists models as a Dynamo frontend does."""
    models = _get(client, f"{url.rstrip('/')}/v1/models", deadline_s)
    return models is not None and models.status == 200 and frontend_problem(models) is None


def _is_listener(client: Client, url: str, deadline_s: float) -> bool:
    """Whether `url` lists workers as Dynamo's RL listener does."""
    listing = _get(client, f"{url.rstrip('/')}/v1/rl/workers", deadline_s)
    return listing is not None and listing.status == 200 and listener_problem(listing) is None


def _has_path(url: str) -> bool:
    return bool(urlsplit(url).path.strip("/"))
