"""The toy model: tokenizer, distribution, decoding, prefix cache, model directory. Pure Python:
the real-Dynamo worker imports it inside the Dynamo environment."""
