"""The Textual app: the only package of the cockpit that imports Textual."""
