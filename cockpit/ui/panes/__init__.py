"""The cockpit's panes: each shows one part of the unit and owns the keys for it."""
