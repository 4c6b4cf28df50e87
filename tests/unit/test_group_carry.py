"""Node 0's edit carried to another node's unit (cockpit.rollout.group.carried): flags and
`Environment=` variables, each node keeping its own --node-rank and its own other lines."""

from __future__ import annotations

import pytest

from cockpit.errors import CockpitError
from cockpit.rollout.group import carried
from cockpit.systemd.unit import load_unit

UNIT = "/etc/systemd/system/sglang-k26.service"
TEXT = """\
[Service]
Environment=HF_HOME=/srv/hf NCCL_SOCKET_IFNAME={nic}
ExecStart=/opt/sglang/bin/python -m sglang.launch_server --model-path /m --tp-size 16 --nnodes 2 --node-rank {rank}
Restart=on-failure
"""


def test_flags_and_variables_reach_every_node_and_other_lines_are_refused() -> None:
    head = load_unit({UNIT: TEXT.format(nic="ib0", rank=0)}, UNIT)
    other = load_unit({UNIT: TEXT.format(nic="ib1", rank=1)}, UNIT)  # its own NIC and rank
    edited = head.set_flag("--mem-fraction-static", "0.8").set_env("SGLANG_LOG", 'a "b" $c %d').unset_env("HF_HOME")
    edit = carried(head, edited)
    assert edit(head).changed() == edited.changed()
    node1 = edit(other)
    assert node1.flag_values()["--node-rank"] == "1" and node1.flag_values()["--mem-fraction-static"] == "0.8"
    assert node1.environment() == {"NCCL_SOCKET_IFNAME": "ib1", "SGLANG_LOG": 'a "b" $c %d'}
    with pytest.raises(CockpitError, match="changes more than flags and Environment= variables"):
        carried(head, edited.set_setting("Restart", "always"))
