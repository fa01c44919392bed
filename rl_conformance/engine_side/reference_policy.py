"""What a checkpoint itself says a probe should give: greedy continuation ids, their log
probabilities, the margin of each greedy choice over the runner-up, and the log probability of
every prompt token given its prefix, computed with transformers on CPU in float32; the largest
logit magnitude at each of those positions (the scale a half-precision engine rounds at); and
the dtype the checkpoint is stored in (its config's `torch_dtype`, or `dtype`; float32 when it
names none).

Usage: python reference_policy.py CHECKPOINT_DIR --prompt 1,2,3 --tokens N
Prints {"checkpoint", "prompt", "completion_ids", "completion_logprobs", "margins",
"prompt_logprobs", "completion_scales", "prompt_scales", "dtype"} (prompt_logprobs[0] and
prompt_scales[0] are null: the first token has no prefix).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tokens", type=int, required=True)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32)
    model.eval()
    prompt = [int(token) for token in args.prompt.split(",")]
    sequence = list(prompt)
    completion, chosen, margins, completion_scales = [], [], [], []
    prompt_logprobs: list[float | None] = [None]
    prompt_scales: list[float | None] = [None]
    with torch.no_grad():
        for step in range(args.tokens):
            logits = model(torch.tensor([sequence])).logits[0].to(torch.float64)
            logprobs = torch.log_softmax(logits, dim=-1)
            scales = logits.abs().max(dim=-1).values
            if step == 0:
                prompt_logprobs += [
                    float(logprobs[position - 1, prompt[position]])
                    for position in range(1, len(prompt))
                ]
                prompt_scales += [float(scales[position - 1]) for position in range(1, len(prompt))]
            top = torch.topk(logprobs[-1], 2)
            token = int(top.indices[0])
            completion.append(token)
            chosen.append(float(top.values[0]))
            margins.append(float(top.values[0] - top.values[1]))
            completion_scales.append(float(scales[-1]))
            sequence.append(token)
    print(
        json.dumps(
            {
                "checkpoint": str(args.checkpoint),
                "prompt": prompt,
                "completion_ids": completion,
                "completion_logprobs": chosen,
                "margins": margins,
                "prompt_logprobs": prompt_logprobs,
                "completion_scales": completion_scales,
                "prompt_scales": prompt_scales,
                "dtype": stored_dtype(args.checkpoint),
            }
        )
    )


def stored_dtype(checkpoint: Path) -> str:
    try:
        config = json.loads((checkpoint / "config.json").read_text())
    except (OSError, ValueError):
        return "float32"
    found = config.get("torch_dtype") or config.get("dtype") if isinstance(config, dict) else None
    return found if isinstance(found, str) else "float32"


if __name__ == "__main__":
    main()
