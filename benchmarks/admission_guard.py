"""Cost of the runtime admission guard on one 1,000-token sample (goal: under 50 µs).

Prints figures; asserts nothing. Usage: python benchmarks/admission_guard.py [--repeat N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from rl_conformance.admission import admit_sample

TOKENS = 1_000
PROMPT = 512
CALLS_PER_ROUND = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=25, help="rounds (default 25)")
    args = parser.parse_args()
    rng = random.Random(0)
    ids = [rng.randrange(150_000) for _ in range(TOKENS)]
    logprobs = [-rng.random() * 5 for _ in range(TOKENS)]
    prompt = [rng.randrange(150_000) for _ in range(PROMPT)]
    prompt_logprobs: list[float | None] = [None] + [-rng.random() * 9 for _ in range(PROMPT - 1)]
    rounds = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        for _ in range(CALLS_PER_ROUND):
            admit_sample(
                ids,
                logprobs,
                "length",
                prompt_ids=prompt,
                prompt_logprobs=prompt_logprobs,
                model="m",
                expected_model="m",
            )
        rounds.append((time.perf_counter() - started) / CALLS_PER_ROUND * 1e6)
    print(f"admit_sample, {TOKENS} generated + {PROMPT} prompt tokens, {args.repeat} rounds")
    print(f"  median {statistics.median(rounds):.1f} µs per sample")
    print(f"  min {min(rounds):.1f} µs, max {max(rounds):.1f} µs (goal: under 50 µs)")


if __name__ == "__main__":
    main()
