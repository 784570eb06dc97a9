#!/bin/sh
# The Lachesis GPU check (docs/gpu-check.md): the node agent's per-process
# NVML figures held against the driver's own on a real NVIDIA GPU. It runs
# from the bundle `make gpu-check` builds, as root, on a machine with only
# the NVIDIA driver (no CUDA toolkit, no Python, nothing to install):
#
#     sh gpu-check.sh [OUTDIR]        # default /tmp/lachesis-gpu-check
#
# Phases, each with its own time limit:
#   environment  the GPU, the driver, the kernel
#   idle         the agent's view with no load started (the memory no
#                process accounts for on an idle GPU)
#   solo         one lachesis-gpuload (BUSY_A %, MEM_A MiB)
#   cadence      one loader busy 1 s of every 2 s, NVML's per-process
#                samples polled every 50 ms: how often one appears and
#                what window it covers (a diagnostic, not judged)
#   pair         two on one GPU (BUSY_A/MEM_A and BUSY_B/MEM_B), rounds
#                of INTERVALS, the last as long as the agent's default
#                telemetry interval
#   contended    two asking together for more than the GPU's time
#                (CBUSY_A + CBUSY_B > 100): each gets less than it asked,
#                so the agent is held to pmon only
#   mps          the same two as MPS clients, where nvidia-cuda-mps-control
#                is found: does the agent's list show each client's pid?
# Each loader allocates and calibrates while the GPU is otherwise idle and
# starts its load on SIGUSR1, so both begin together.
#
# Exit status: 0 every comparison agreed (a phase where the driver's own
# per-process figures were off the loads, the agent reading them as they
# are, is listed as PASS(driver-off)); 1 the agent's path failed or
# disagreed with the driver beyond tolerance; 2 the check could not run
# (no driver, a loader failed). The report is OUTDIR/report.txt; every reading is in
# OUTDIR/<phase>.json.
set -u

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/lachesis-gpu-check}
BUSY_A=${BUSY_A:-60}
MEM_A=${MEM_A:-2048}
BUSY_B=${BUSY_B:-25}
MEM_B=${MEM_B:-6144}
INTERVALS=${INTERVALS:-5s,5s,5s,30s}
CBUSY_A=${CBUSY_A:-80}
CBUSY_B=${CBUSY_B:-30}
GPU=${GPU:-0}
# SETTLE: seconds between releasing the loaders and the first reading.
SETTLE=${SETTLE:-2}
# The driver's tools live in /usr/bin on most installs; container images
# mount them under /usr/local/nvidia; MPS may come with a CUDA toolkit.
PATH=$PATH:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/usr/sbin:/bin
export PATH

mkdir -p "$out" || exit 2
rm -f "$out/status" "$out"/*.json "$out"/load-*.log

loaders=""
mps_started=""

# to SECONDS CMD...: CMD with a time limit, where coreutils' timeout is
# there (it is on every distribution the driver supports).
to() {
	secs=$1
	shift
	if command -v timeout >/dev/null 2>&1; then
		timeout -k 5 "$secs" "$@"
	else
		"$@"
	fi
}

nap() { sleep "$1" 2>/dev/null || sleep 1; }

cleanup() {
	for p in $loaders; do kill "$p" 2>/dev/null; done
	for p in $loaders; do wait "$p" 2>/dev/null; done
	loaders=""
	if [ -n "$mps_started" ]; then
		echo quit | to 20 nvidia-cuda-mps-control >/dev/null 2>&1
		mps_started=""
	fi
}

# start_loader PHASE NAME BUSY MEMMIB [FLAGS...]: a lachesis-gpuload
# waiting for SIGUSR1, its pid in $loader_pid once its "ready" line is out
# (60 s).
start_loader() {
	log="$out/load-$1-$2.log"
	lname=$2 lbusy=$3 lmem=$4
	shift 4
	"$here/lachesis-gpuload" -gpu "$GPU" -busy "$lbusy" -mem-mib "$lmem" -duration 10m -wait-usr1 "$@" >"$log" 2>&1 &
	loader_pid=$!
	loaders="$loaders $loader_pid"
	n=0
	while ! grep -q '^ready ' "$log" 2>/dev/null; do
		if ! kill -0 "$loader_pid" 2>/dev/null; then
			echo "loader $lname ended before it was ready:"
			sed 's/^/    /' "$log"
			return 1
		fi
		n=$((n + 1))
		if [ "$n" -gt 300 ]; then
			echo "loader $lname not ready after 60 s:"
			sed 's/^/    /' "$log"
			return 1
		fi
		nap 0.2
	done
	sed 's/^/  loader: /' "$log"
}

stop_loaders() {
	for p in $loaders; do kill "$p" 2>/dev/null; done
	for p in $loaders; do wait "$p" 2>/dev/null; done
	loaders=""
	for f in "$out"/load-"$1"-*.log; do
		[ -f "$f" ] && grep '^done ' "$f" | sed 's/^/  loader: /'
	done
}

# check PHASE ARGS...: lachesis-gpucheck for one phase; its exit status
# is folded into the run's.
worst=0
fold() {
	if [ "$1" -gt "$worst" ]; then worst=$1; fi
}
results=""
check() {
	phase=$1
	shift
	to 300 "$here/lachesis-gpucheck" -phase "$phase" -json "$out/$phase.json" "$@"
	rc=$?
	case $rc in
	0) results="$results $phase:PASS" ;;
	1) results="$results $phase:FAIL" ;;
	3) results="$results $phase:PASS(driver-off)" rc=0 ;;
	*) results="$results $phase:ERROR($rc)" rc=2 ;;
	esac
	fold "$rc"
}

# pair PHASE BUSY_A MEM_A BUSY_B MEM_B CHECK-ARGS...: the two loaders
# started, released together, checked.
pair() {
	phase=$1 ba=$2 ma=$3 bb=$4 mb=$5
	shift 5
	if ! start_loader "$phase" a "$ba" "$ma"; then
		results="$results $phase:ERROR"
		fold 2
		stop_loaders "$phase"
		return
	fi
	pa=$loader_pid
	if ! start_loader "$phase" b "$bb" "$mb"; then
		results="$results $phase:ERROR"
		fold 2
		stop_loaders "$phase"
		return
	fi
	pb=$loader_pid
	kill -USR1 "$pa" "$pb"
	nap "$SETTLE"
	check "$phase" -load "a:$pa:$ba:$ma" -load "b:$pb:$bb:$mb" "$@"
	# The driver's own process table (its Type column tells an MPS
	# client, M+C, from a plain context, C).
	to 30 nvidia-smi | sed -n '/Processes:/,$p' | sed 's/^/  nvidia-smi: /'
	stop_loaders "$phase"
}

main() {
	# main runs in the subshell of its pipe to tee: its loaders and MPS
	# daemon are stopped here, whatever ends it.
	trap 'cleanup' EXIT
	trap 'cleanup; exit 2' INT TERM HUP
	echo "== environment"
	date -u '+%Y-%m-%d %H:%M:%S UTC'
	uname -srm
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "nvidia-smi not found: is the NVIDIA driver installed?"
		echo 2 >"$out/status"
		return
	fi
	to 30 nvidia-smi -L
	to 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_mode,persistence_mode --format=csv
	to 30 nvidia-smi | grep -m1 'CUDA Version'
	if command -v ldd >/dev/null 2>&1; then
		for b in lachesis-gpuload lachesis-gpucheck; do
			echo "ldd $b: $(ldd "$here/$b" 2>&1 | awk '{print $1}' | tr '\n' ' ')"
		done
	fi

	echo
	check idle -intervals 2s

	echo
	echo "== solo: one loader, busy $BUSY_A% with $MEM_A MiB"
	if start_loader solo a "$BUSY_A" "$MEM_A"; then
		kill -USR1 "$loader_pid"
		nap "$SETTLE"
		check solo -load "a:$loader_pid:$BUSY_A:$MEM_A" -intervals 5s,5s
	else
		results="$results solo:ERROR"
		fold 2
	fi
	stop_loaders solo

	echo
	echo "== cadence: one loader busy 1 s of every 2 s"
	if start_loader cadence a 50 1024 -period 2s; then
		kill -USR1 "$loader_pid"
		nap "$SETTLE"
		check cadence -load "a:$loader_pid:50:1024" -intervals "" -cadence 6s
	else
		results="$results cadence:ERROR"
		fold 2
	fi
	stop_loaders cadence

	echo
	echo "== pair: two loaders on GPU $GPU, busy $BUSY_A% with $MEM_A MiB and $BUSY_B% with $MEM_B MiB"
	pair pair "$BUSY_A" "$MEM_A" "$BUSY_B" "$MEM_B" -intervals "$INTERVALS"

	echo
	echo "== contended: two loaders asking for more than the GPU has, busy $CBUSY_A% and $CBUSY_B% with the same memory"
	pair contended "$CBUSY_A" "$MEM_A" "$CBUSY_B" "$MEM_B" -busy-is-demand -intervals 5s,5s

	echo
	echo "== mps: the same two as MPS clients"
	if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
		echo "no MPS on this machine: nvidia-cuda-mps-control not found (searched $PATH)"
		results="$results mps:SKIPPED(no-MPS)"
	else
		CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe"
		CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
		export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		echo "nvidia-cuda-mps-control: $(command -v nvidia-cuda-mps-control)"
		if to 30 nvidia-cuda-mps-control -d; then
			mps_started=1
			pair mps "$BUSY_A" "$MEM_A" "$BUSY_B" "$MEM_B" -mps -intervals 5s,5s
			echo get_server_list | to 20 nvidia-cuda-mps-control 2>&1 | sed 's/^/  MPS server list: /'
			echo quit | to 20 nvidia-cuda-mps-control
			mps_started=""
			nap 1
		else
			echo "nvidia-cuda-mps-control -d failed: MPS could not be started here"
			results="$results mps:SKIPPED(MPS-did-not-start)"
		fi
		for f in "$CUDA_MPS_LOG_DIRECTORY"/control.log "$CUDA_MPS_LOG_DIRECTORY"/server.log; do
			[ -f "$f" ] && tail -n 20 "$f" | sed "s|^|  $(basename "$f"): |"
		done
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	fi

	echo
	echo "== summary:$results"
	case $worst in
	0) echo "== the agent's figures agreed with the driver's within tolerance" ;;
	1) echo "== the agent's figures DISAGREED with the driver's (see [FAIL] lines)" ;;
	*) echo "== the check could not run every phase (see above)" ;;
	esac
	echo "$worst" >"$out/status"
}

main 2>&1 | tee "$out/report.txt"
status=$(cat "$out/status" 2>/dev/null || echo 2)
exit "$status"
