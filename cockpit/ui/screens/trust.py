"""The unknown-host-key question: the fingerprint, and trust only on an explicit yes.
(A changed key never reaches this screen: it is refused in the SSH layer.)"""

from __future__ import annotations

from cockpit.ui.screens.confirm import ConfirmModal


def trust_modal(host: str, fingerprint: str) -> ConfirmModal:
    return ConfirmModal(
        f"Unknown host key for {host}",
        f"The host presents a key that no known_hosts file lists:\n\n    {fingerprint}\n\n"
        "Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run on the host.\n"
        "Trust it, and add it to your known_hosts?",
        confirm="Trust",
        danger=True,
    )
