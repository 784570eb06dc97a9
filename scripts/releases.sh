#!/usr/bin/env bash
# The Debian and Slurm releases Lachesis supports, in one place: Debian 12
# "bookworm" ships Slurm 22.05, Debian 13 "trixie" ships Slurm 24.11. A
# machine of one runs the other's tests in a root of the other release
# (scripts/release-root.sh).
#
# Sourced by the other scripts, or run:
#   scripts/releases.sh slurm       the Slurm release this machine builds
#                                   for: the installed slurmctld's major.minor,
#                                   else the one its Debian release ships
#   scripts/releases.sh build-dir   the build tree of that release
#                                   (build/slurm-22.05); LACHESIS_BUILD, when
#                                   set, wins
#   scripts/releases.sh other       the codename of the other supported
#                                   Debian release (the root's)
#   scripts/releases.sh codename    this machine's Debian codename

# slurm_of_codename prints the Slurm release a Debian release ships.
slurm_of_codename() {
  case $1 in
    bookworm) echo 22.05 ;;
    trixie) echo 24.11 ;;
    *) return 1 ;;
  esac
}

# other_codename prints the supported Debian release beside $1.
other_codename() {
  case $1 in
    bookworm) echo trixie ;;
    trixie) echo bookworm ;;
    *) return 1 ;;
  esac
}

host_codename() {
  local VERSION_CODENAME=
  # shellcheck disable=SC1091
  . /etc/os-release
  echo "${VERSION_CODENAME:-unknown}"
}

# slurm_release prints the installed slurmctld's major.minor, or before
# `make deps` installed it, the release this machine's Debian ships.
slurm_release() {
  local v c
  v=$(dpkg-query -W -f='${db:Status-Status} ${Version}' slurmctld 2>/dev/null) || v=
  if [[ $v =~ ^installed\ ([0-9]+\.[0-9]+) ]]; then
    echo "${BASH_REMATCH[1]}"
    return
  fi
  c=$(host_codename)
  slurm_of_codename "$c" || {
    echo "releases: no slurmctld installed and Debian '$c' is not a supported release (bookworm, trixie)" >&2
    return 1
  }
}

build_dir() {
  if [[ -n ${LACHESIS_BUILD:-} ]]; then
    echo "$LACHESIS_BUILD"
  else
    echo "build/slurm-$(slurm_release)"
  fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  case ${1:-} in
    slurm) slurm_release ;;
    build-dir) build_dir ;;
    other)
      c=$(host_codename)
      other_codename "$c" || { echo "releases: Debian '$c' is not a supported release (bookworm, trixie)" >&2; exit 1; }
      ;;
    codename) host_codename ;;
    *) echo "usage: $0 slurm|build-dir|other|codename" >&2; exit 2 ;;
  esac
fi
