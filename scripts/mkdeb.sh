#!/usr/bin/env bash
# Builds Lachesis's two Debian packages from what `make build` produced:
#   lachesis-slurmctld   the controller plugins, in Slurm's own PluginDir
#   lachesis-node-agent  the node agent daemon, its systemd unit, the CLI,
#                        and the SPANK plugin lachesis_jobend for slurmstepd
# Plain dpkg-deb from a staged tree: no debian/ source package, no debhelper,
# so it builds on any host that can build Lachesis.
#
# Both are built for the Slurm release of the build tree they come from
# (scripts/releases.sh: build/slurm-22.05, build/slurm-24.11), depend on
# it, and carry it in their version and file name:
#   lachesis-slurmctld_<version>+slurm24.11_amd64.deb
#
# Usage: scripts/mkdeb.sh [OUTDIR]   (default: deb/ in the build tree)
# Environment:
#   LACHESIS_BUILD           the build tree (default: the installed Slurm's)
#   LACHESIS_DEB_VERSION     the package version (default: VERSION file, else
#                            derived from git describe)
#   LACHESIS_DEB_MAINTAINER  the Maintainer field
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/releases.sh
build=$(build_dir)
out=${1:-$build/deb}
plugins=$build/plugins
bin=$build/bin

die() { echo "mkdeb: $*" >&2; exit 1; }

for f in "$plugins"/{liblachesis_core,priority_tiresias,preempt_tiresias,job_submit_synergy,lachesis_jobend}.so \
         "$bin"/lachesis-node-agent "$bin"/lachesis-profiler; do
  [[ -f $f ]] || die "$f is missing; run make build first"
done

# A Debian version must start with a digit and use only [A-Za-z0-9.+~-].
# Tags v1.2.3 and v1.2.3-4-gabc (4 commits later) become 1.2.3 and
# 1.2.3+git4.abc; an untagged tree is 0.0~git<commit date>.<sha>, where ~
# sorts it before any tagged 0.0 release. A tree with uncommitted changes
# gets +dirty so it is never mistaken for the commit's own build.
deb_version() {
  if [[ -n ${LACHESIS_DEB_VERSION:-} ]]; then echo "$LACHESIS_DEB_VERSION"; return; fi
  if [[ -s VERSION ]]; then tr -d '[:space:]' <VERSION; return; fi
  local d v sha date
  git rev-parse --git-dir >/dev/null 2>&1 || die "not a git tree and no VERSION file"
  sha=$(git rev-parse --short HEAD)
  # Without --always: an untagged tree fails here instead of printing a
  # bare hash that could pass for a version.
  if d=$(git describe --tags 2>/dev/null) && [[ $d =~ ^v?([0-9][0-9A-Za-z.+~]*)(-([0-9]+)-g([0-9a-f]+))?$ ]]; then
    v=${BASH_REMATCH[1]}
    [[ -n ${BASH_REMATCH[2]} ]] && v+="+git${BASH_REMATCH[3]}.${BASH_REMATCH[4]}"
  else
    date=$(git log -1 --format=%cd --date=format:%Y%m%d)
    v="0.0~git$date.$sha"
  fi
  git diff --quiet HEAD -- 2>/dev/null || v+="+dirty"
  echo "$v"
}

version=$(deb_version)
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "'$version' is not a valid native Debian version"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugindir=/usr/lib/$multiarch/slurm-wlm
maintainer=${LACHESIS_DEB_MAINTAINER:-Lachesis maintainers <lachesis@example.org>}
# The plugins use Slurm's internal structures (job_record_t, the plugin
# ops tables), so they are bound to the exact Slurm they were compiled
# against: same upstream version and Debian revision.
slurm_version=$(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null) ||
  die "slurmctld is not installed; the plugins must be built against the controller's Slurm"
[[ -n $slurm_version ]] || die "cannot read slurmctld's version"
# The SPANK plugin only has to match Slurm's major.minor release (Slurm's
# plugin loader masks the micro version for SPANK plugins): the node
# package Breaks any other slurmd rather than Depending on one exact build.
[[ $slurm_version =~ ^([0-9]+)\.([0-9]+) ]] || die "cannot read a release from slurmctld's version $slurm_version"
slurm_release=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
# The plugins must have been compiled against this very Slurm: the build
# tree's source carries the stamp of the version it was configured for.
[[ -e $build/slurm-src/.configured-$slurm_version ]] ||
  die "$build was not built against the installed slurmctld $slurm_version (no $build/slurm-src/.configured-$slurm_version); run make build"
# The release in the version (and so in the file name): a site moving from
# Debian 12 to 13 upgrades 1.2+slurm22.05 to 1.2+slurm24.11.
version+="+slurm$slurm_release"
slurm_next_release=$(printf '%s.%02d' "${BASH_REMATCH[1]}" $((10#${BASH_REMATCH[2]} + 1)))

# Same tree, same packages: dpkg-deb clamps every mtime to this.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shlibs computes the Depends of the ELF files given (libc6 and libmunge2
# with their minimum versions) the way debhelper would; dpkg-shlibdeps
# wants a debian/control, so it runs in a scratch directory.
shlibs() {
  local s=$work/shlibs abs=() f
  mkdir -p "$s/debian"
  printf 'Source: lachesis\n\nPackage: lachesis\nArchitecture: any\n' >"$s/debian/control"
  for f; do abs+=("$(realpath "$f")"); done
  (cd "$s" && dpkg-shlibdeps -O -e"${abs[@]}" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

# stage_doc writes what Debian policy asks of every package: the copyright
# file and the changelog, in /usr/share/doc/PACKAGE, with the README and
# the docs/ pages it links to.
stage_doc() {
  local root=$1 pkg=$2 doc=$1/usr/share/doc/$2
  install -d -m 0755 "$doc"
  cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: lachesis
Comment: Built by scripts/mkdeb.sh from the Lachesis source tree.

Files: *
Copyright: $(git log -1 --format=%cd --date=format:%Y 2>/dev/null || date +%Y) the Lachesis authors
License: unspecified
 The source tree has no license file yet; ask the authors before
 redistributing these packages.
EOF
  local date
  date=$(git log -1 --format=%aD 2>/dev/null || date -R)
  printf '%s (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- %s  %s\n' \
    "$pkg" "$version" "$(git describe --tags --always --dirty 2>/dev/null || echo "$version")" \
    "$maintainer" "$date" | gzip -9n >"$doc/changelog.gz"
  install -m 0644 README.md "$doc/"
  gzip -9n "$doc/README.md"
  # The README is a front page; the manual it links to is docs/*.md.
  install -d -m 0755 "$doc/docs"
  install -m 0644 docs/*.md "$doc/docs/"
  gzip -9n "$doc"/docs/*.md
  chmod 0644 "$doc/copyright" "$doc/changelog.gz"
}

finish() {
  local root=$1 pkg=$2
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 md5sum) >"$root/DEBIAN/md5sums"
  chmod 0644 "$root/DEBIAN/md5sums"
  local kb
  kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  sed -i "s/^Installed-Size: .*/Installed-Size: $kb/" "$root/DEBIAN/control"
  dpkg-deb --build --root-owner-group -Zxz "$root" "$out/${pkg}_${version}_${arch}.deb" >/dev/null
  echo "mkdeb: $out/${pkg}_${version}_${arch}.deb"
}

# strip_to copies an ELF file without its debug information and symbol
# table; the dynamic symbols Slurm and the plugins resolve stay.
strip_to() {
  install -D -m 0755 "$1" "$2"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$2"
}

rm -rf "$out"
mkdir -p "$out"

# --- lachesis-slurmctld -------------------------------------------------
r=$work/lachesis-slurmctld
install -d -m 0755 "$r/DEBIAN"
for so in liblachesis_core priority_tiresias preempt_tiresias job_submit_synergy; do
  # 0644: plugins are dlopen()ed, never executed (lintian: shlib-with-executable-bit).
  strip_to "$plugins/$so.so" "$r$plugindir/$so.so"
  chmod 0644 "$r$plugindir/$so.so"
done
install -D -m 0644 etc/lachesis.yaml "$r/etc/slurm/lachesis.yaml"
stage_doc "$r" lachesis-slurmctld
install -m 0644 etc/slurm.conf.lachesis "$r/usr/share/doc/lachesis-slurmctld/"
# The pair table's seeds (sharing.pair_table's default): Gavel's measured
# co-location throughputs, MIT (data/README.md says whose).
install -D -m 0644 -t "$r/usr/share/lachesis/gavel" data/gavel/throughputs.csv data/gavel/colocated.csv
ctld_shlibs=$(shlibs "$plugins/liblachesis_core.so") || true
[[ -n $ctld_shlibs ]] || ctld_shlibs="libc6, libmunge2"
cat >"$r/DEBIAN/control" <<EOF
Package: lachesis-slurmctld
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: 0
Depends: slurmctld (= $slurm_version), $ctld_shlibs
Section: admin
Priority: optional
Homepage: https://github.com/lachesis-sched/lachesis
Description: Tiresias and Synergy GPU scheduling plugins for slurmctld
 Lachesis makes Slurm schedule GPU jobs like Tiresias (jobs ranked by the
 GPU service they have attained, in preemptive queues) and Synergy (CPUs
 and memory per GPU sized from each model's measured profile).
 .
 This package holds the slurmctld plugins priority/tiresias,
 preempt/tiresias and job_submit/synergy, with the Go core they load, in
 Slurm's plugin directory. They are built against one exact Slurm version.
 Enable them with the lines of
 /usr/share/doc/lachesis-slurmctld/slurm.conf.lachesis in slurm.conf;
 /etc/slurm/lachesis.yaml holds Lachesis's own settings.
EOF
printf '/etc/slurm/lachesis.yaml\n' >"$r/DEBIAN/conffiles"
chmod 0644 "$r/DEBIAN/control" "$r/DEBIAN/conffiles"
finish "$r" lachesis-slurmctld

# --- lachesis-node-agent ------------------------------------------------
r=$work/lachesis-node-agent
unit=lachesis-node-agent.service
install -d -m 0755 "$r/DEBIAN"
# The packaged commands are built again as position-independent
# executables with read-only relocations (Debian's hardening defaults);
# bin/ keeps the plain build the tests and the demo use. Not -z now: the
# NVML binding leaves symbols of newer drivers unresolved until used, so
# immediate binding stops the commands at start.
pie=$work/pie
mkdir -p "$pie"
"${GO:-go}" build -buildmode=pie -trimpath -ldflags "-extldflags '-Wl,-z,relro'" \
  -o "$pie/" ./cmd/lachesis-node-agent ./cmd/lachesis-profiler
strip_to "$pie/lachesis-node-agent" "$r/usr/sbin/lachesis-node-agent"
strip_to "$pie/lachesis-profiler" "$r/usr/bin/lachesis-profiler"
install -D -m 0644 "etc/$unit" "$r/lib/systemd/system/$unit"
install -D -m 0644 docs/man/lachesis-node-agent.8 "$r/usr/share/man/man8/lachesis-node-agent.8"
install -D -m 0644 docs/man/lachesis-profiler.1 "$r/usr/share/man/man1/lachesis-profiler.1"
gzip -9n "$r/usr/share/man/man8/lachesis-node-agent.8" "$r/usr/share/man/man1/lachesis-profiler.1"
install -D -m 0644 etc/node-agent.yaml "$r/etc/lachesis/node-agent.yaml"
# The training-loop helper jobs import to report progress (the SPANK plugin
# names the agent's socket in their environment): outside dist-packages, so
# that any interpreter (a venv, conda) can use it through PYTHONPATH.
install -D -m 0644 etc/lachesis_progress.py "$r/usr/share/lachesis/python/lachesis_progress.py"
# slurmstepd's SPANK plugin that reports a batch job's true end to this
# agent, enabled through Debian's plugstack.conf.d include; "optional", so
# a node without the agent running still runs its jobs.
strip_to "$plugins/lachesis_jobend.so" "$r$plugindir/lachesis_jobend.so"
chmod 0644 "$r$plugindir/lachesis_jobend.so"
install -d -m 0755 "$r/etc/slurm/plugstack.conf.d"
printf '# Lachesis: tell the node agent when a batch job really ends (docs/install.md, set-up step 5).\noptional %s/lachesis_jobend.so socket=/run/lachesis/agent.sock\n' \
  "$plugindir" >"$r/etc/slurm/plugstack.conf.d/lachesis-jobend.conf"
chmod 0644 "$r/etc/slurm/plugstack.conf.d/lachesis-jobend.conf"
stage_doc "$r" lachesis-node-agent
agent_shlibs=$(shlibs "$pie/lachesis-node-agent" "$pie/lachesis-profiler") || true
[[ -n $agent_shlibs ]] || agent_shlibs="libc6, libmunge2"
cat >"$r/DEBIAN/control" <<EOF
Package: lachesis-node-agent
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: 0
Depends: munge, $agent_shlibs
Recommends: slurmd
Breaks: slurmd (<< $slurm_release~), slurmd (>= $slurm_next_release~)
Section: admin
Priority: optional
Homepage: https://github.com/lachesis-sched/lachesis
Description: Lachesis node agent: model profiling and GPU telemetry for Slurm
 The node agent runs on every GPU node of a Slurm cluster scheduled by
 Lachesis. It measures how a model's throughput depends on the CPUs and
 memory it gets and reports the profiles, signed by munge, to the Lachesis
 core inside slurmctld, which sizes jobs from them.
 .
 This package holds the daemon, its systemd unit, its configuration
 /etc/lachesis/node-agent.yaml, the lachesis-profiler command and the
 SPANK plugin lachesis_jobend, which tells the agent when a batch job
 really ended (enabled in /etc/slurm/plugstack.conf.d) and names the
 agent's socket in jobs' environment, where a training loop may report
 its progress with /usr/share/lachesis/python/lachesis_progress.py. The unit
 is not enabled on installation: set the controller address in the
 configuration first, then run
 systemctl enable --now lachesis-node-agent.
EOF
printf '/etc/lachesis/node-agent.yaml\n/etc/slurm/plugstack.conf.d/lachesis-jobend.conf\n' >"$r/DEBIAN/conffiles"

# The maintainer scripts do what dh_installsystemd would, except that a
# fresh installation does not enable or start the agent: its shipped
# configuration names a placeholder controller. An upgrade restarts an
# agent that was running. Nothing touches systemd when it is not the
# running init ([ -d /run/systemd/system ]), and deb-systemd-helper is used
# only where init-system-helpers provides it.
cat >"$r/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
unit=$unit
case "\$1" in
configure|abort-upgrade|abort-deconfigure|abort-remove)
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		# Lifts only the mask postrm set on removal.
		deb-systemd-helper unmask "\$unit" >/dev/null || true
		deb-systemd-helper update-state "\$unit" >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "\$2" ]; then
			if command -v deb-systemd-invoke >/dev/null 2>&1; then
				deb-systemd-invoke try-restart "\$unit" >/dev/null || true
			fi
		fi
	fi
	;;
esac
exit 0
EOF
cat >"$r/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
unit=$unit
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
	if command -v deb-systemd-invoke >/dev/null 2>&1; then
		deb-systemd-invoke stop "\$unit" >/dev/null || true
	fi
fi
exit 0
EOF
cat >"$r/DEBIAN/postrm" <<EOF
#!/bin/sh
set -e
unit=$unit
if [ -d /run/systemd/system ] && [ "\$1" = remove ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if command -v deb-systemd-helper >/dev/null 2>&1; then
	case "\$1" in
	remove)
		# Keeps the unit from being started by anything that still
		# refers to it until the package is purged or reinstalled.
		deb-systemd-helper mask "\$unit" >/dev/null || true
		;;
	purge)
		deb-systemd-helper purge "\$unit" >/dev/null || true
		deb-systemd-helper unmask "\$unit" >/dev/null || true
		;;
	esac
fi
if [ "\$1" = purge ]; then
	# The spool (systemd's StateDirectory) and the socket directory.
	rm -rf /var/lib/lachesis/node-agent /run/lachesis
	rmdir /var/lib/lachesis 2>/dev/null || true
	rmdir /etc/lachesis 2>/dev/null || true
fi
exit 0
EOF
chmod 0644 "$r/DEBIAN/control" "$r/DEBIAN/conffiles"
chmod 0755 "$r/DEBIAN/postinst" "$r/DEBIAN/prerm" "$r/DEBIAN/postrm"
finish "$r" lachesis-node-agent
