#!/usr/bin/env bash
# Fetches the Debian source of the *installed* slurm-wlm version, unpacks it
# into $1 (default build/slurm-src) and configures it with Debian's flags, so
# the plugins compile against exactly the headers and config.h of the
# slurmctld that will load them. Cached: does nothing when the tree for the
# installed version is already configured.
set -euo pipefail
dest=${1:-build/slurm-src}
ver=$(dpkg-query -W -f='${Version}' slurmctld)          # e.g. 22.05.8-4+deb12u3
upstream=${ver%%-*}                                       # 22.05.8
stamp="$dest/.configured-$ver"
[[ -f $stamp ]] && { echo "slurm-src: $dest is configured for $ver"; exit 0; }

mkdir -p "$dest"
dl=$(mktemp -d); trap 'rm -rf "$dl"' EXIT
# A private apt configuration with a deb-src line keeps the machine's own
# sources untouched.
mkdir -p "$dl/apt/lists/partial" "$dl/apt/sources.list.d"
. /etc/os-release
cat >"$dl/apt/sources.list" <<SRC
deb-src http://deb.debian.org/debian $VERSION_CODENAME main
deb-src http://deb.debian.org/debian-security $VERSION_CODENAME-security main
deb-src http://deb.debian.org/debian $VERSION_CODENAME-updates main
SRC
aptopt=(-o Dir::Etc::SourceList="$dl/apt/sources.list"
        -o Dir::Etc::SourceParts="$dl/apt/sources.list.d"
        -o Dir::State::Lists="$dl/apt/lists" -o APT::Sandbox::User=root -qq)
apt-get "${aptopt[@]}" update
(cd "$dl" && apt-get "${aptopt[@]}" source --download-only "slurm-wlm=$ver")
tarball=$(ls "$dl"/slurm-wlm_"$upstream".orig.tar.*)
rm -rf "$dest"/*
tar -xf "$tarball" -C "$dest" --strip-components=1
# Debian's patches change code the plugins see (e.g. paths); apply them too.
if ls "$dl"/slurm-wlm_"$ver".debian.tar.* >/dev/null 2>&1; then
  mkdir -p "$dl/deb" && tar -xf "$dl"/slurm-wlm_"$ver".debian.tar.* -C "$dl/deb"
  if [[ -f $dl/deb/debian/patches/series ]]; then
    while read -r p; do
      [[ -z $p || $p == \#* ]] && continue
      patch -d "$dest" -p1 -s -f <"$dl/deb/debian/patches/$p" || echo "slurm-src: patch $p did not apply cleanly" >&2
    done <"$dl/deb/debian/patches/series"
  fi
fi
echo "slurm-src: configuring $upstream with Debian's flags"
(cd "$dest" && ./configure --sysconfdir=/etc/slurm --with-munge --enable-pam \
   --without-rpath --disable-debug --enable-multiple-slurmd >configure.log 2>&1) \
  || { tail -30 "$dest/configure.log"; exit 1; }
touch "$stamp"
