"""Modal screens: confirmations, the host-key question, the unit picker, help."""
