import uuid

import httpx

from rl_conformance.admission import admit_sample
from rl_conformance.certify import GenerationGated, Policy, RefreshFailed, RolloutRequest, Sample


class MyAdapter:  # non-streamed rollouts; vLLM Python-worker refresh
    ROUTES = {"pause_generation", "update_weights_from_disk", "flush_cache", "resume_generation"}

    def __init__(self, ctx):
        self.ctx, self.gated, self.http = ctx, False, httpx.Client(timeout=ctx.request_timeout_s)

    def generate(self, req: RolloutRequest, admit: bool = True) -> Sample | None:
        if self.gated and admit:
            raise GenerationGated("the last refresh failed")
        body = {"model": self.ctx.model, "prompt": [*req.prompt_ids], "max_tokens": req.max_tokens,
                "logprobs": 0, "nvext": {"extra_fields": ["completion_token_ids"]}}
        for attempt in (f"{req.slot}-{uuid.uuid4().hex}" for _ in range(self.ctx.max_attempts)):
            try:  # each attempt has its own identity; only a verified result is admitted
                r = self.http.post(f"{self.ctx.frontend_url}/v1/completions", json=body,
                                   headers={"x-request-id": attempt}).json()
                c, ids = r["choices"][0], tuple(r["nvext"]["completion_token_ids"])
                s = Sample(req.prompt_ids, ids, tuple(c["logprobs"]["token_logprobs"]),
                           c["finish_reason"], attempt, model=r["model"])
                admit_sample(ids, s.logprobs, s.finish_reason, model=s.model,
                             expected_model=self.ctx.model)
            except (httpx.HTTPError, LookupError, TypeError, ValueError):  # incl. AdmissionError
                continue
            if admit and not req.cancel.is_cancelled():  # a cancelled rollout is never admitted
                self.ctx.sink.admit(s)
            return s  # after max_attempts failures: None

    def phase(self, route: str, body: dict, version: str | None = None) -> None:
        doc = self.http.get(f"{self.ctx.rl_url}/v1/rl/workers").json()  # before every phase
        workers = {w["instance_id"]: w for w in doc["workers"] if doc["protocol_version"] == 1}
        ok = [w for w in workers.values() if not w.get("error") and set(w["routes"]) >= self.ROUTES]
        if len(ok) < self.ctx.expected_workers or self.members not in (None, set(workers)):
            raise RefreshFailed(f"fleet incomplete, failing or changed: {doc}")  # stay gated
        self.members = set(workers)
        for w in workers.values():
            reply = self.http.post(f"{w['system_url']}/engine/{route}", json=body).json()
            if reply.get("status") != "ok" or (version and reply.get("version") != version):
                raise RefreshFailed(f"{route} on {w['instance_id']}: {reply}")

    def refresh_policy(self, policy: Policy) -> None:
        self.gated, self.members, v, path = True, None, policy.version, policy.model_path
        self.phase("pause_generation", {})
        self.phase("update_weights_from_disk", {"model_path": path, "weight_version": v}, v)
        self.phase("flush_cache", {})
        self.phase("get_weight_version", {}, v)
        self.phase("resume_generation", {})
        if self.generate(RolloutRequest("post-update", (1, 2, 3), 2), admit=False) is None:
            raise RefreshFailed("post-update generation failed")
        self.gated = False

    def close(self) -> None:
        self.http.close()
