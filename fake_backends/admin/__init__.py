"""Worker system servers: `/health`, `/metrics` and each backend's `/engine/<route>` family."""
