"""Units as deployments: a unit's facts found once, its status with readiness, the nodes of a
launch over several hosts as one group, and the fleet of every unit on every host."""
