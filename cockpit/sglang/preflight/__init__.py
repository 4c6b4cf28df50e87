"""What stops a server before it is started: the static rules on the flags, SGLang's own dry
run, the host (GPUs, ports, model files, whether the model and its draft fit), the unit's own
settings, and what must agree between the nodes of one launch."""
