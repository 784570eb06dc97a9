#!/usr/bin/env bash
# A Debian root of the other supported release, made once per machine and
# reused by every checkout on it, so that one machine tests Lachesis on both
# Slurm releases: on Debian 12 a Debian 13 (trixie) root for Slurm 24.11, on
# Debian 13 a Debian 12 (bookworm) root for Slurm 22.05 (scripts/releases.sh
# holds the pairs).
#
# Usage: scripts/release-root.sh make        make the root, or reuse it
#        scripts/release-root.sh run CMD...  run CMD inside it, in this
#                                            directory (made first if missing)
#        scripts/release-root.sh path        print where the root is
#        scripts/release-root.sh made        exit 0 if the root is made
#        scripts/release-root.sh remove      delete it (waits for runs)
# Environment:
#   LACHESIS_ROOT_CODENAME  the root's release (default: the other one)
#   LACHESIS_ROOTS          where roots live (default /var/lib/lachesis-roots;
#                           not /var/lib/lachesis, which the node agent's
#                           package owns and purges)
#   LACHESIS_MIRROR         Debian mirror (default http://deb.debian.org/debian)
#
# make: debootstrap (minbase) into ROOT.partial, Debian's sources, then this
# checkout's scripts/install-deps.sh inside (the one list of packages serves
# both releases), then the marker and a rename to ROOT. A run killed half way
# leaves only ROOT.partial, which the next make deletes and redoes. An
# exclusive flock keeps two makes from building at once; runs hold it
# shared, so `remove` never pulls a root from under a running test.
#
# run: a private mount namespace (unshare -m: no mount outlives the
# command) with /proc, /sys (the cgroup hierarchies with it), /dev,
# a fresh /run, the host's resolv.conf and /etc/hosts, Go (/usr/local/go) and its module
# and build caches, the checkout (and its git directory, for a worktree)
# at the same absolute path, and /run/lachesis-test (the machine-wide
# locks of test ports and users, so host and root tests never take the
# same ports). The root keeps its own /tmp, /etc and dpkg: clusters started
# inside, their test directories and the packages installed inside stay
# there. The network is the host's (loopback clusters, apt).
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/.." && pwd)
# shellcheck source=releases.sh
. "$here/releases.sh"

# Raised whenever make's recipe changes, so an older root is made again.
recipe=1

die() { echo "release-root: $*" >&2; exit 1; }

codename=${LACHESIS_ROOT_CODENAME:-}
if [[ -z $codename ]]; then
  host=$(host_codename)
  codename=$(other_codename "$host") || die "Debian '$host' is not a supported release (bookworm, trixie)"
fi
slurm_of_codename "$codename" >/dev/null || die "'$codename' is not a supported release (bookworm, trixie)"
roots=${LACHESIS_ROOTS:-/var/lib/lachesis-roots}
root=$roots/$codename
marker=$root/.lachesis-root
mirror=${LACHESIS_MIRROR:-http://deb.debian.org/debian}

need_root() { ((EUID == 0)) || die "needs root (debootstrap, mounts, chroot)"; }

# lock MODE takes the root's flock on fd 8: -x to make or remove, -s to run.
lock() {
  mkdir -p "$roots"
  exec 8>"$roots/.$codename.lock"
  flock "$1" 8
}

complete() { [[ -f $marker ]] && grep -qx "recipe=$recipe" "$marker"; }

# mounted_under prints the mount points at or below $1 in this namespace.
mounted_under() { findmnt -rn -o TARGET | awk -v p="$1" '$0 == p || index($0, p "/") == 1'; }

# wipe deletes a root directory, refusing while anything is mounted in it
# (a bind of the checkout must never be followed by rm).
wipe() {
  [[ -e $1 ]] || return 0
  if [[ -n $(mounted_under "$1") ]]; then
    die "$1 has mounts ($(mounted_under "$1" | tr '\n' ' ')); unmount them first"
  fi
  rm -rf --one-file-system -- "$1"
}

# in_root DIR CMD... runs CMD chrooted in DIR with everything a build and
# a loopback cluster need mounted, in a mount namespace of its own.
in_root() {
  local dir=$1
  shift
  local gocache gomodcache gitcommon
  gocache=$(go_env GOCACHE)
  gomodcache=$(go_env GOMODCACHE)
  gitcommon=$(git -C "$PWD" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  # The caller's directory, the checkout it lies in, Go's caches and a
  # worktree's git directory: each is bound at the same path inside.
  local binds=("$repo")
  [[ $PWD == "$repo" || $PWD == "$repo"/* ]] || binds+=("$PWD")
  [[ -n $gitcommon && $gitcommon != "$repo"/* ]] && binds+=("$gitcommon")
  [[ -n $gocache ]] && binds+=("$gocache")
  [[ -n $gomodcache ]] && binds+=("$gomodcache")
  mkdir -p /run/lachesis-test
  # The build tree, make's own variables and a temporary directory of the
  # host mean nothing inside: the root's release picks its own tree.
  env -u LACHESIS_BUILD -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u TMPDIR \
    LACHESIS_IN_ROOT=$codename GOCACHE=$gocache GOMODCACHE=$gomodcache \
    unshare --mount --propagation private -- bash -euo pipefail -c '
    dir=$1 cwd=$2 nbind=$3; shift 3
    binds=("${@:1:nbind}"); shift "$nbind"
    mount -t proc proc "$dir/proc"
    mount --rbind /sys "$dir/sys"
    mount --rbind /dev "$dir/dev"
    mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$dir/run"
    mkdir -p "$dir/run/lachesis-test"
    mount --bind /run/lachesis-test "$dir/run/lachesis-test"
    mount --bind /etc/resolv.conf "$dir/etc/resolv.conf"
    # The host names too: slurmctld resolves the submit host of a job, the
    # hostname of this machine, to answer salloc and srun; without it each
    # such completion waited 10 s of getaddrinfo retries under the job
    # write lock, see "Unable to resolve" in the slurmctld log.
    mount --bind /etc/hosts "$dir/etc/hosts"
    if [[ -d /usr/local/go ]]; then
      mkdir -p "$dir/usr/local/go"
      mount --bind /usr/local/go "$dir/usr/local/go"
      mount -o remount,bind,ro "$dir/usr/local/go"
    fi
    for b in "${binds[@]}"; do
      [[ -d $b ]] || continue
      mkdir -p "$dir$b"
      mount --bind "$b" "$dir$b"
    done
    export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    exec chroot "$dir" /bin/bash -c "cd \"\$1\" && shift && exec \"\$@\"" - "$cwd" "$@"
  ' - "$dir" "$PWD" "${#binds[@]}" "${binds[@]}" "$@"
}

go_env() {
  local go=go
  command -v go >/dev/null || go=/usr/local/go/bin/go
  "$go" env "$1" 2>/dev/null || true
}

make_root() {
  need_root
  lock -x
  if complete; then
    echo "release-root: $root ($codename, Slurm $(slurm_of_codename "$codename")) is made; reusing it"
    return
  fi
  local start=$SECONDS part=$root.partial
  command -v debootstrap >/dev/null || {
    echo "release-root: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  }
  [[ -e /usr/share/debootstrap/scripts/$codename ]] ||
    die "this debootstrap does not know $codename; install a newer debootstrap"
  # A root of an older recipe, or one left half made, is made anew.
  wipe "$part"
  wipe "$root"
  echo "release-root: making $root ($codename) with debootstrap from $mirror"
  # In a mount namespace of its own: the /proc and /sys debootstrap mounts
  # in the target go with it, even if it is killed.
  unshare --mount --propagation private -- debootstrap --variant=minbase \
    --include=ca-certificates,git,make "$codename" "$part" "$mirror" >"$roots/$codename.debootstrap.log" 2>&1 ||
    { tail -20 "$roots/$codename.debootstrap.log" >&2; die "debootstrap failed (log: $roots/$codename.debootstrap.log)"; }
  cat >"$part/etc/apt/sources.list" <<EOF
deb $mirror $codename main
deb $mirror $codename-updates main
deb http://deb.debian.org/debian-security $codename-security main
EOF
  # resolv.conf is a mount point when the root runs: a plain file, never a
  # link that the bind mount would follow.
  rm -f "$part/etc/resolv.conf" && : >"$part/etc/resolv.conf"
  echo "lachesis-$codename" >"$part/etc/debian_chroot"
  echo "release-root: debootstrap took $((SECONDS - start)) s; installing Lachesis's packages inside"
  in_root "$part" bash -c 'apt-get update -qq && bash scripts/install-deps.sh slurmdbd' ||
    die "installing the packages inside $part failed"
  printf 'recipe=%s\nmade=%s\nby=%s\n' "$recipe" "$(date -u +%FT%TZ)" "$repo" >"$part/.lachesis-root"
  mv -T "$part" "$root"
  echo "release-root: made $root in $((SECONDS - start)) s"
}

case ${1:-} in
  make)
    start=$SECONDS
    make_root
    echo "release-root: make took $((SECONDS - start)) s"
    ;;
  run)
    shift
    (($#)) || die "usage: $0 run CMD..."
    need_root
    complete || (make_root)
    lock -s
    complete || die "$root is not made"
    in_root "$root" "$@"
    ;;
  path)
    echo "$root"
    ;;
  made)
    complete
    ;;
  remove)
    need_root
    lock -x
    wipe "$root.partial"
    wipe "$root"
    ;;
  *)
    echo "usage: $0 make | run CMD... | path | remove" >&2
    exit 2
    ;;
esac
