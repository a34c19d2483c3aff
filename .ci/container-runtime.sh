#!/usr/bin/env bash
# A container runtime for the Terminal-Bench / Harbor tests: podman (daemonless) on Debian, set up
# for a host that is itself a container. Run as root; safe to run twice.
set -euo pipefail
apt-get install -y podman crun busybox-static
mkdir -p /etc/containers
if ! grep -qs '^default_ulimits' /etc/containers/containers.conf; then
  # podman's default open-files limit (1048576) is above this host's hard limit, and crun may not
  # raise it: keep the host's limits instead.
  printf '[containers]\ndefault_ulimits = []\n' >> /etc/containers/containers.conf
fi
# crun refuses cgroup "hybrid mode" (v1 controllers plus a cgroup2 mount at .../unified); the
# v2 mount holds no controller a container needs here, so it is detached.
if mount | grep -q ' /sys/fs/cgroup/unified type cgroup2'; then
  umount -l /sys/fs/cgroup/unified || true
fi
podman version --format '{{.Server.Version}}'
