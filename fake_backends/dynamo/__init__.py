"""The toy model as a REAL Dynamo 1.6.1 worker (run inside the Dynamo environment)."""
