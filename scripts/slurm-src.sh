#!/usr/bin/env bash
# Fetches the Debian source of a slurm-wlm version, unpacks it into DEST and
# configures it with Debian's flags, so the plugins compile against exactly
# the headers and config.h of the slurmctld that will load them. Cached:
# does nothing when DEST is already configured for that version.
#
# Usage: scripts/slurm-src.sh [DEST [VERSION [CODENAME]]]
#   DEST      default build/slurm-src
#   VERSION   a Debian version of slurm-wlm (24.11.5-4+deb13u1); default the
#             installed slurmctld's
#   CODENAME  the Debian release whose archive has it (trixie); default this
#             machine's. Naming another release's version and codename
#             prepares that release's tree here, e.g. to compile the plugins
#             for 24.11 on a Debian 12 machine.
#
# Where the source package is only partly served (Debian 13's 24.11.5: the
# upstream tarball answers, its .dsc and debian.tar.xz answer 404) the tree
# is the upstream tarball alone, as Debian's pool has it; every file that is
# downloaded is checked against the SHA-256 of the archive's signed Sources
# index. docs/slurm-releases.md says what Debian's patches change.
set -euo pipefail
dest=${1:-build/slurm-src}
ver=${2:-$(dpkg-query -W -f='${Version}' slurmctld)}    # e.g. 22.05.8-4+deb12u3
codename=${3:-}
if [[ -z $codename ]]; then
  . /etc/os-release
  codename=$VERSION_CODENAME
fi
upstream=${ver%%-*}                                       # 22.05.8
stamp="$dest/.configured-$ver"
[[ -f $stamp ]] && { echo "slurm-src: $dest is configured for $ver"; exit 0; }

mkdir -p "$dest"
dl=$(mktemp -d); trap 'rm -rf "$dl"' EXIT
# A private apt configuration with deb-src lines keeps the machine's own
# sources untouched.
mkdir -p "$dl/apt/lists/partial" "$dl/apt/sources.list.d"
cat >"$dl/apt/sources.list" <<SRC
deb-src http://deb.debian.org/debian $codename main
deb-src http://deb.debian.org/debian-security $codename-security main
deb-src http://deb.debian.org/debian $codename-updates main
SRC
aptopt=(-o Dir::Etc::SourceList="$dl/apt/sources.list"
        -o Dir::Etc::SourceParts="$dl/apt/sources.list.d"
        -o Dir::State::Lists="$dl/apt/lists" -o APT::Sandbox::User=root -qq)
apt-get "${aptopt[@]}" update
# 'URI' NAME SIZE SHA256:HEX, one line per file of the source package.
uris=$(cd "$dl" && apt-get "${aptopt[@]}" source --print-uris "slurm-wlm=$ver") ||
  { echo "slurm-src: Debian $codename has no source of slurm-wlm $ver" >&2; exit 1; }
while read -r uri name _ hash; do
  uri=${uri//\'/}
  [[ $hash == SHA256:* ]] || { echo "slurm-src: no SHA-256 for $name in the Sources index" >&2; exit 1; }
  if ! /usr/lib/apt/apt-helper -o APT::Sandbox::User=root -qq download-file "$uri" "$dl/$name" "$hash" >"$dl/helper.log" 2>&1; then
    case $name in
      *.orig.tar.*) cat "$dl/helper.log" >&2; echo "slurm-src: cannot download $name" >&2; exit 1 ;;
      *) echo "slurm-src: $name is not served ($(grep -m1 -o '[0-9][0-9][0-9] .*' "$dl/helper.log" || tail -n1 "$dl/helper.log")); building from the upstream tarball alone" >&2 ;;
    esac
  fi
done <<<"$uris"
tarball=$(ls "$dl"/slurm-wlm_"$upstream".orig.tar.*)
rm -rf "${dest:?}"/* "$dest"/.configured-*
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
# Debian's flags, less --enable-pam: PAM only builds the pam_slurm modules,
# no header the plugins include reads HAVE_PAM, and from 23.02 configure
# stops on --enable-pam without libpam's headers (22.05 only warned, so its
# trees never had HAVE_PAM either).
echo "slurm-src: configuring $upstream with Debian's flags"
(cd "$dest" && ./configure --sysconfdir=/etc/slurm --with-munge \
   --without-rpath --disable-debug --enable-multiple-slurmd >configure.log 2>&1) \
  || { tail -30 "$dest/configure.log"; exit 1; }
touch "$stamp"
