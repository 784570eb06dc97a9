#!/usr/bin/env bash
# Installs, from Debian's packages, everything Lachesis needs to build and to
# run the loopback Slurm cluster. Idempotent: a second run installs nothing.
#
# Usage: scripts/install-deps.sh [slurmdbd] [torch]
#   slurmdbd (or LACHESIS_ACCOUNTING=slurmdbd in the environment) also installs
#   what scripts/cluster.sh needs for its accounting mode. It is opt-in so that
#   the default install, and CI time, stay as they were.
#   torch also installs Debian's CPU PyTorch and torchvision (and Pillow) for
#   `make demo-profile`; they are large, so only that target asks for them.
set -euo pipefail

# prometheus: the cluster tests start a private server that scrapes the
# core's and the node agent's /metrics (its packaged daemon is not started).
# e2fsprogs: chattr, with which the durability tests make the ledger
# unwritable (a full Debian has it; a minbase root, release-root.sh's, not).
pkgs=(slurmctld slurmd slurm-client munge libmunge-dev libslurm-dev
      build-essential pkg-config sqlite3 procps python3 prometheus e2fsprogs)

accounting=${LACHESIS_ACCOUNTING:-none}
torch=no
for arg; do
  case $arg in
    slurmdbd) accounting=slurmdbd ;;
    torch) torch=yes ;;
    *) echo "usage: $0 [slurmdbd] [torch]" >&2; exit 2 ;;
  esac
done
case $accounting in
  none) ;;
  # The *-core packages hold mariadbd, mariadb-install-db and the mariadb
  # client, which is all a private, script-started server needs. The
  # mariadb-server/mariadb-client meta packages would add galera, perl, rsync,
  # socat, a system mysql user and a system datadir in /var/lib/mysql, none of
  # which the cluster uses. slurmdbd pulls in slurm-wlm-mysql-plugin
  # (accounting_storage_mysql.so).
  slurmdbd) pkgs+=(slurmdbd mariadb-server-core mariadb-client-core) ;;
  *) echo "install-deps: LACHESIS_ACCOUNTING must be none or slurmdbd, got '$accounting'" >&2; exit 2 ;;
esac
if [[ $torch == yes ]]; then
  pkgs+=(python3-torch python3-torchvision python3-pil)
fi

find_missing() {
  missing=()
  local p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
}
find_missing
if ((${#missing[@]})); then
  # Parallel cluster tests each run `cluster.sh up`, which runs this script,
  # and apt refuses to run twice at once: one install at a time, the lock
  # being this script file (read-only, so nothing in /tmp for root to
  # follow). Whoever waited finds the packages there.
  exec 9<"${BASH_SOURCE[0]}"
  flock 9
  find_missing
fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The packages' postinst scripts try to start daemons through systemd; a
  # policy-rc.d that says "no" keeps them from starting (we start our own).
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
