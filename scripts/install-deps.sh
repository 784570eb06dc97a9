#!/usr/bin/env bash
# Installs, from Debian's packages, everything Lachesis needs to build and to
# run the loopback Slurm cluster. Idempotent: a second run installs nothing.
set -euo pipefail

pkgs=(slurmctld slurmd slurm-client munge libmunge-dev libslurm-dev
      build-essential pkg-config sqlite3 procps python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
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
