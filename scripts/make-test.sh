#!/usr/bin/env bash
# `make test`: every phase in turn (packages and sources, build, unit tests,
# cluster tests), stopping at the first that fails, then the wall time of
# each phase and the slowest cluster tests, so the next person sees where
# the time goes.
#
# Usage: scripts/make-test.sh             run the phases (make test)
#        scripts/make-test.sh slowest LOG [N]
#                                         the N (10) slowest tests in a
#                                         `go test -v` log
set -euo pipefail

cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
make=${MAKE:-make}
cluster_log=build/test-cluster.log

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

if [[ ${1:-} == slowest ]]; then
  [[ -r ${2:-} ]] || { echo "usage: $0 slowest LOG [N]" >&2; exit 2; }
  slowest "$2" "${3:-10}"
  exit 0
fi

names=() secs=() codes=()
phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "=== make test: $name"
  "$@" || rc=$?
  names+=("$name") secs+=($((SECONDS - start))) codes+=("$rc")
  return "$rc"
}

summary() {
  local i total=0
  echo
  echo "=== make test: wall time per phase"
  for i in "${!names[@]}"; do
    total=$((total + secs[i]))
    printf '  %-40s %4d:%02d  %s\n' "${names[i]}" $((secs[i] / 60)) $((secs[i] % 60)) \
      "$( ((codes[i] == 0)) && echo ok || echo "FAILED (exit ${codes[i]})")"
  done
  printf '  %-40s %4d:%02d\n' total $((total / 60)) $((total % 60))
  if [[ -s $cluster_log ]] && grep -q -- '--- ' "$cluster_log"; then
    echo "=== slowest cluster tests ($cluster_log)"
    slowest "$cluster_log" 10
  fi
}
# The summary never changes the exit status: a green run stays green.
trap 'rc=$?; summary || true; exit $rc' EXIT

# The accounting packages too: parallel cluster tests must not each find
# them missing and install them at once.
phase "deps (packages, modules, Slurm source)" \
  bash -c "bash scripts/install-deps.sh slurmdbd && go mod download && $make --no-print-directory slurm-src"
phase "build (plugins, commands, packages)" $make --no-print-directory build deb
phase "unit tests" $make --no-print-directory test-unit
rm -f "$cluster_log"
phase "cluster tests" $make --no-print-directory test-cluster
