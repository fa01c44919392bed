"""Named ways to break the contract: one mechanism, two catalogues (the fake deployment's, and
the engine's behind the real Dynamo frontend)."""
