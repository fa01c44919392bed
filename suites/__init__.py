"""The conformance suites: one module per contract area, run against a Target by the plugin."""
