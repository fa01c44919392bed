"""The RL discovery listener (`GET /v1/rl/workers`) and its namespace scope."""
