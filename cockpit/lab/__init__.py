"""cockpit lab: a disposable systemd host in a container, and the SGLang stand-in it runs."""
