"""JSON Schemas (draft 2020-12) of the wire shapes: data only, read by schema_registry."""
