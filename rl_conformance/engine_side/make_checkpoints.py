"""Write a tiny random-weight Qwen2-style model and further checkpoints of the same
architecture, made locally (no model hub), for a real vLLM worker on CPU.

Usage: python make_checkpoints.py TOKENIZER_DIR OUT_DIR --layout tied|untied
    [--dtype float32|bfloat16] --count N

TOKENIZER_DIR holds a tokenizer (tokenizer.json and its configs) and a config.json whose vocabulary
and special ids are kept; OUT_DIR/checkpoint-0 .. checkpoint-(N-1) are written, each with its own
seed. `tied` shares the input embedding with the output head (as Qwen3-0.6B, Qwen2.5-0.5B and
Llama-3.2-1B ship); `untied` stores a separate lm_head. Weights are drawn wider than a training
initialisation (std 0.2) so greedy choices have clear margins, and stored in `--dtype` (float32
unless told otherwise; bfloat16 as GPU fleets serve their checkpoints).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
ARCHITECTURE = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,  # the CPU attention backend has no kernel for very small heads
    "num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "initializer_range": 0.2,
    "torch_dtype": "float32",
}
KEPT = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tokenizer_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--layout", choices=("tied", "untied"), default="untied")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--count", type=int, default=3)
    args = parser.parse_args()

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    source = json.loads((args.tokenizer_dir / "config.json").read_text())
    settings = dict(ARCHITECTURE, **{key: source[key] for key in KEPT if key in source})
    settings["tie_word_embeddings"] = args.layout == "tied"
    settings["torch_dtype"] = args.dtype
    dtype = getattr(torch, args.dtype)
    written = []
    for seed in range(args.count):
        directory = args.out_dir / f"checkpoint-{seed}"
        directory.mkdir(parents=True, exist_ok=True)
        for name in TOKENIZER_FILES:
            if (args.tokenizer_dir / name).exists():
                shutil.copy(args.tokenizer_dir / name, directory / name)
        torch.manual_seed(seed)
        # Drawn in float32 whatever the stored dtype, so both dtypes hold the same weights.
        model = Qwen2ForCausalLM(Qwen2Config(**settings)).to(torch.float32).to(dtype)
        model.save_pretrained(directory, safe_serialization=True)
        written.append(str(directory))
    print(json.dumps({"layout": args.layout, "dtype": args.dtype, "checkpoints": written}))


if __name__ == "__main__":
    main()
