"""Assembling a whole fake deployment: sockets, apps, the control port, the ready line,
pytest fixtures; and hostile servers that break HTTP itself."""
