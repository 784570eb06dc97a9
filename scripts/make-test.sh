#!/usr/bin/env bash
# `make test`: every phase in turn, on both supported Slurm releases: this
# machine's own (natively) and the other one, inside a Debian root of the
# other release (scripts/release-root.sh: on Debian 12 a Debian 13 root
# with Slurm 24.11, on Debian 13 a Debian 12 root with 22.05). Phases:
# packages and sources (host, root), build (one build tree per release),
# unit tests (once: they need no Slurm), cluster tests (each release). It
# stops at the first phase that fails and ends with each phase's wall
# time, each release's counts of cluster tests and subtests (passed,
# failed, not applicable on that release, skipped) and its slowest tests.
#
# Usage: scripts/make-test.sh             run the phases (make test)
#        scripts/make-test.sh slowest LOG [N]
#                                         the N (10) slowest tests in a
#                                         `go test -v` log
#        scripts/make-test.sh counts LOG  a `go test -v` log's counts
#        scripts/make-test.sh stop-clusters
#                                         stop the loopback clusters left
#                                         in the test directories, on the
#                                         host and in the root
# Environment:
#   LACHESIS_RELEASES   both (default), host (this machine's release only)
#                       or root (the other release only)
#   LACHESIS_CLUSTER_CONCURRENT  1: the two releases' cluster tests run at
#                       once; 0 (default): one after the other (docs/testing.md
#                       says why)
set -euo pipefail

cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
make=${MAKE:-make}
# shellcheck source=releases.sh
. scripts/releases.sh

# Lines "--- PASS: TestX/sub (12.34s)" of a `go test -v` log, slowest first.
# A parent whose subtests ran in parallel reports 0.00s; its subtests count.
# awk, not head, keeps the first N: head would close the pipe early and,
# under pipefail, sort's SIGPIPE (exit 141) would fail a green `make test`.
slowest() {
  local log=$1 n=${2:-10}
  grep -hE -- '^\s*--- (PASS|FAIL|SKIP): \S+ \([0-9.]+s\)' "$log" |
    sed -E 's/^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)/\3 \1 \2/' |
    sort -k1,1 -rn |
    awk -v n="$n" 'NR <= n {printf "  %8.1f s  %-4s %s\n", $1, $2, $3}'
}

# counts prints a `go test -v` log's results: tests and subtests passed,
# failed, not applicable on the release under test (the cluster tests'
# notOnThisSlurm: "NOT APPLICABLE TestX on Slurm 22.05: why", listed with
# their reasons) and skipped for any other reason.
counts() {
  awk '
    match($0, /NOT APPLICABLE [^ ]+ on Slurm [0-9.]+: /) {
      s = substr($0, RSTART + 15); name = s; sub(/ .*/, "", name)
      why = substr($0, RSTART + RLENGTH); na[name] = why
    }
    match($0, /^ *--- (PASS|FAIL|SKIP): [^ ]+ /) {
      split(substr($0, RSTART, RLENGTH), f, " ")
      res = f[2]; sub(/:$/, "", res); name = f[3]
      kind = index(name, "/") ? "sub" : "top"
      if (res == "SKIP" && name in na) res = "N/A"
      n[res, kind]++
      if (res == "FAIL") failed = failed "\n    " name
      if (res == "SKIP") skipped = skipped "\n    " name
    }
    END {
      split("PASS FAIL N/A SKIP", order, " ")
      split("passed failed not-applicable skipped", word, " ")
      line = ""
      for (i = 1; i <= 4; i++) {
        r = order[i]
        line = line sprintf("%s%d %s (%d tests, %d subtests)", i > 1 ? ", " : "", \
          n[r, "top"] + n[r, "sub"], word[i], n[r, "top"], n[r, "sub"])
      }
      print "  " line
      if (failed != "") print "  failed:" failed
      for (t in na) print "  not applicable: " t ": " na[t]
      if (skipped != "") print "  skipped:" skipped
    }' "$1"
}

# stop_clusters stops the loopback clusters a dead test binary left in the
# test directories (and the demo's), here and, when it is made, in the root.
stop_clusters() {
  local d
  for d in "${LACHESIS_TEST_DIR:-/tmp/lachesis-test}"/*/ /tmp/lachesis-demo/; do
    [[ -d $d ]] && LACHESIS_CLUSTER_DIR=$d bash scripts/cluster.sh down >/dev/null 2>&1 || true
  done
  if [[ -z ${LACHESIS_IN_ROOT:-} ]] && bash scripts/release-root.sh made 2>/dev/null; then
    bash scripts/release-root.sh run bash scripts/make-test.sh stop-clusters || true
  fi
}

case ${1:-} in
  slowest)
    [[ -r ${2:-} ]] || { echo "usage: $0 slowest LOG [N]" >&2; exit 2; }
    slowest "$2" "${3:-10}"
    exit 0
    ;;
  counts)
    [[ -r ${2:-} ]] || { echo "usage: $0 counts LOG" >&2; exit 2; }
    counts "$2"
    exit 0
    ;;
  stop-clusters)
    stop_clusters
    exit 0
    ;;
  "") ;;
  *) echo "usage: $0 [slowest LOG [N] | counts LOG | stop-clusters]" >&2; exit 2 ;;
esac

releases=${LACHESIS_RELEASES:-both}
case $releases in both | host | root) ;; *) echo "make-test: LACHESIS_RELEASES must be both, host or root" >&2; exit 2 ;; esac
# Inside a root, that root's release is the only one: no root in a root.
[[ -n ${LACHESIS_IN_ROOT:-} ]] && releases=host
host_release=$(slurm_release)
root_release=
if [[ $releases != host ]]; then
  other=$(other_codename "$(host_codename)") || { echo "make-test: this Debian release has no other release to test in a root" >&2; exit 1; }
  root_release=$(slurm_of_codename "$other")
fi

# in_root runs a command in the other release's root, in this checkout.
in_root() { bash scripts/release-root.sh run "$@"; }

names=() secs=() codes=() logs=()
phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "=== make test: $name"
  "$@" || rc=$?
  names+=("$name") secs+=($((SECONDS - start))) codes+=("$rc")
  return "$rc"
}

summary() {
  local i total=0 l
  echo
  echo "=== make test: wall time per phase"
  for i in "${!names[@]}"; do
    total=$((total + secs[i]))
    printf '  %-52s %4d:%02d  %s\n' "${names[i]}" $((secs[i] / 60)) $((secs[i] % 60)) \
      "$( ((codes[i] == 0)) && echo ok || echo "FAILED (exit ${codes[i]})")"
  done
  printf '  %-52s %4d:%02d\n' "total (wall: $((SECONDS / 60)):$(printf %02d $((SECONDS % 60))))" $((total / 60)) $((total % 60))
  [[ $releases == root ]] && echo "  Slurm $host_release (this machine): not run (LACHESIS_RELEASES=root)"
  [[ $releases == host && -z ${LACHESIS_IN_ROOT:-} ]] && echo "  the other release: not run (LACHESIS_RELEASES=host)"
  local pass=0 fail=0 skip=0
  for l in "${logs[@]}"; do
    [[ -s ${l#*=} ]] && grep -q -- '--- ' "${l#*=}" || continue
    echo "=== cluster tests on Slurm ${l%%=*} (${l#*=})"
    counts "${l#*=}"
    echo "  slowest:"
    slowest "${l#*=}" 10
    pass=$((pass + $(grep -cE '^\s*--- PASS: ' "${l#*=}" || true)))
    fail=$((fail + $(grep -cE '^\s*--- FAIL: ' "${l#*=}" || true)))
    skip=$((skip + $(grep -cE '^\s*--- SKIP: ' "${l#*=}" || true)))
  done
  # One plain closing line for both releases' cluster tests and subtests
  # (not applicable ones among the skipped).
  ((${#logs[@]})) && echo "cluster: $pass passed, $fail failed, $skip skipped"
  return 0
}
# The summary never changes the exit status: a green run stays green.
trap 'rc=$?; summary || true; exit $rc' EXIT

host_build=$(build_dir)
if [[ $releases != root ]]; then
  # The accounting packages too: parallel cluster tests must not each find
  # them missing and install them at once.
  phase "deps, Slurm $host_release (packages, modules, source)" \
    bash -c "bash scripts/install-deps.sh slurmdbd && go mod download && $make --no-print-directory slurm-src"
  # Read again: a fresh machine has its Slurm only now.
  host_release=$(slurm_release) host_build=$(build_dir)
fi
if [[ -n $root_release ]]; then
  phase "deps, Slurm $root_release (the $other root: make or reuse)" \
    bash -c "bash scripts/release-root.sh make && bash scripts/release-root.sh run bash -c 'bash scripts/install-deps.sh slurmdbd && go mod download && $make --no-print-directory slurm-src'"
fi
if [[ $releases != root ]]; then
  phase "build, Slurm $host_release (plugins, commands, packages)" $make --no-print-directory build deb
fi
if [[ -n $root_release ]]; then
  phase "build, Slurm $root_release (in the root)" in_root $make --no-print-directory build deb
fi
# Unit tests need no Slurm: once, where the machine's own Go builds.
phase "unit tests" $make --no-print-directory test-unit

host_log=$host_build/test-cluster.log
root_log=build/slurm-$root_release/test-cluster.log
[[ $releases != root ]] && { rm -f "$host_log"; logs+=("$host_release=$host_log"); }
[[ -n $root_release ]] && { rm -f "$root_log"; logs+=("$root_release=$root_log"); }
if [[ $releases == both && ${LACHESIS_CLUSTER_CONCURRENT:-0} == 1 ]]; then
  # Both suites at once, each in its own process; the phase fails if
  # either does. Their logs go to files (the summary counts them), their
  # output is kept apart by a prefix.
  both() {
    local rc_host=0 rc_root=0
    ($make --no-print-directory test-cluster 2>&1 | sed -u "s/^/[$host_release] /") &
    local p_host=$!
    (in_root $make --no-print-directory test-cluster 2>&1 | sed -u "s/^/[$root_release] /") &
    local p_root=$!
    wait "$p_host" || rc_host=$?
    wait "$p_root" || rc_root=$?
    ((rc_host == 0 && rc_root == 0))
  }
  phase "cluster tests, Slurm $host_release and $root_release at once" both
else
  rc=0
  if [[ $releases != root ]]; then
    phase "cluster tests, Slurm $host_release" $make --no-print-directory test-cluster || rc=$?
  fi
  # The other release runs even when this one failed: both counts are
  # worth having, and the exit status still says failed.
  if [[ -n $root_release ]]; then
    phase "cluster tests, Slurm $root_release (in the root)" in_root $make --no-print-directory test-cluster || rc=$?
  fi
  exit "$rc"
fi
