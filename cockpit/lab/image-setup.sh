#!/bin/sh
# Runs once inside the freshly debootstrapped rootfs (chroot). Its bytes are part of the
# image's cache key, so any change here rebuilds the image.
set -eu

# No /etc/hostname: each lab keeps the name nspawn gives it (--machine=NAME).
rm -f /etc/hostname
# Host keys come from the lab's state dir at boot (bind-mounted at /etc/ssh/lab), so that
# every lab has its own key and known_hosts can be written before the first connection.
rm -f /etc/ssh/ssh_host_*
cat > /etc/ssh/sshd_config.d/cockpit-lab.conf <<'CONF'
HostKey /etc/ssh/lab/ssh_host_ed25519_key
AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/lab/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
CONF

# `operator`: the non-root path. Reads the journal; may change units only through sudo -n:
# systemctl, the cockpit's write contract (install to a temp file, mv onto the unit, rm of
# its temp files and old backups), and kill (the write modal's k: signals, never a root shell).
useradd --create-home --shell /bin/bash --gid operator --groups systemd-journal operator
passwd --lock operator >/dev/null
cat > /etc/sudoers.d/operator <<'CONF'
operator ALL=(root) NOPASSWD: /usr/bin/systemctl, /usr/bin/install, /usr/bin/mv, /usr/bin/rm, /usr/bin/kill
CONF
chmod 0440 /etc/sudoers.d/operator

# Where the fixture tracebacks say SGLang lives (with this release's Python); the source of one
# release is bind-mounted into site-packages at boot.
python=$(python3 -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
python3 -m venv --without-pip /opt/sglang/venv
mkdir -p "/opt/sglang/venv/lib/$python/site-packages/sglang" /opt/cockpit /opt/cockpit-lab/guest /opt/cockpit-lab/units

# Provisioning: a oneshot unit early in each boot (the rootfs is a fresh overlay every time)
# installs the demo unit and the lab's own units, then starts them. Not a generator: from
# systemd 253 on generators run with / read-only, and they run again at every daemon-reload.
cat > /etc/systemd/system/cockpit-lab-provision.service <<'UNIT'
[Unit]
Description=cockpit lab: install and start the demo unit and the lab's units
After=local-fs.target
Before=ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh /opt/cockpit-lab/guest/provision

[Install]
WantedBy=multi-user.target
UNIT
systemctl enable cockpit-lab-provision.service >/dev/null 2>&1

# The journal lives in /run (a tmpfs) and would be vacuumed at 10% of it: keep a lot, like a
# GPU host's persistent journal, so paging back and floods behave as they do there.
mkdir -p /etc/systemd/journald.conf.d
cat > /etc/systemd/journald.conf.d/cockpit-lab.conf <<'CONF'
[Journal]
RuntimeMaxUse=1G
RuntimeMaxFileSize=128M
# A unit's LogRateLimitIntervalSec= travels to journald as a cgroup xattr, which does not
# reach it inside the container; without this, floods and load runs lose lines past ~32k.
RateLimitIntervalSec=0
CONF

# Nothing in the lab needs these at boot; they only slow it down.
systemctl mask systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer fstrim.timer man-db.timer >/dev/null 2>&1 || true
apt-get clean
rm -rf /var/lib/apt/lists/*
