"""What the engine workers are and do: identity, scheduling (pause, abort, drain), weights,
counters, ledgers, and the state every app of a deployment shares. No HTTP."""
