"""Bytes on the wire: JSON text and float renderings as Dynamo writes them, SSE frames, replies."""
