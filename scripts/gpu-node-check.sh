#!/usr/bin/env bash
# What only a real GPU node shows, run by hand on one (never in CI):
#   1. the node agent's telemetry read through go-nvml from the real driver,
#      scraped from its Prometheus endpoint;
#   2. a real PyTorch training job on the GPU (etc/demo/train_image.py
#      --device "$DEVICE") profiled through the node agent: the sweep over CPU
#      counts, its progress, and the profile the agent would deliver.
# No slurmctld is needed: the agent spools the profile for a controller that
# is not there. Run as root from the repository root:
#
#     BIN=bin bash scripts/gpu-node-check.sh
#
# BIN holds lachesis-node-agent and lachesis-profiler; OUT (default
# /tmp/gpu-node-check) receives the logs. POINT_SECONDS, MAX_CPUS, ARCH and
# IMAGES tune the sweep.
set -euo pipefail
BIN=$(realpath "${BIN:-bin}")
OUT=${OUT:-/tmp/gpu-node-check}
POINT_SECONDS=${POINT_SECONDS:-25}
MAX_CPUS=${MAX_CPUS:-0}
ARCH=${ARCH:-resnet18}
IMAGES=${IMAGES:-4096}
SIGNAL=${SIGNAL:-regex} # or nvml: GPU utilisation as the throughput signal
DEVICE=${DEVICE:-cuda} # cpu: a dry run of this script on a machine without a GPU
USER_NAME=${USER_NAME:-lprof}
PY=$(command -v python3)
mkdir -p "$OUT"

gpus() { if [ "$DEVICE" = cpu ]; then echo 0; else nvidia-smi -L | wc -l; fi; }
[ "$DEVICE" = cpu ] || nvidia-smi -L
id "$USER_NAME" >/dev/null 2>&1 || useradd -m "$USER_NAME"
home=$(getent passwd "$USER_NAME" | cut -d: -f6)

dir=/tmp/lgc
rm -rf "$dir"
mkdir -p "$dir/run"
chmod 755 "$dir"
install -m 0644 etc/demo/train_image.py "$dir/train_image.py"
cat >"$dir/node-agent.yaml" <<EOF
controller: "127.0.0.1:9"
munge_socket: $dir/no-munge.sock
spool: $dir/spool/spool.db
socket: $dir/run/agent.sock
node: gpu-check
node_gpus: $(gpus)
telemetry_interval: 2
metrics:
  listen: "127.0.0.1:9469"
EOF

"$BIN/lachesis-node-agent" -config "$dir/node-agent.yaml" >"$OUT/agent.log" 2>&1 &
agent=$!
scraper=
trap 'kill $agent $scraper 2>/dev/null; wait $agent 2>/dev/null; cp -f "$dir/node-agent.yaml" "$OUT/" 2>/dev/null || true' EXIT
for _ in $(seq 60); do
	[ -S "$dir/run/agent.sock" ] && break
	sleep 0.5
done
"$BIN/lachesis-profiler" status --agent-socket "$dir/run/agent.sock"

echo "== telemetry through go-nvml (agent /metrics after two intervals)"
sleep 5
"$PY" - <<'EOF' | tee "$OUT/metrics.txt"
import urllib.request
body = urllib.request.urlopen("http://127.0.0.1:9469/metrics", timeout=5).read().decode()
lines = [l for l in body.splitlines() if l.startswith("lachesis_agent_")]
print("\n".join(lines) if lines else "no GPU series in /metrics")
EOF

# The same series while the sweep trains on the GPU, every 10 s.
scrape() {
	while sleep 10; do
		"$PY" -c 'import urllib.request as u; print("\n".join(l for l in u.urlopen("http://127.0.0.1:9469/metrics", timeout=5).read().decode().splitlines() if l.startswith(("lachesis_agent_gpu_utilization", "lachesis_agent_gpu_power", "lachesis_agent_gpu_memory_used"))))' || true
	done
}
scrape >"$OUT/metrics-during-sweep.txt" 2>&1 &
scraper=$!

echo "== dataset ($IMAGES JPEGs) and the sweep, as $USER_NAME"
runuser -u "$USER_NAME" -- "$PY" "$dir/train_image.py" --make-data --data "$home/data" --images "$IMAGES"
cd "$home"
signal=(--regex '([0-9.]+) samples/s')
[ "$SIGNAL" = nvml ] && signal=(--nvml)
set -o pipefail
runuser -u "$USER_NAME" -- "$BIN/lachesis-profiler" profile --agent-socket "$dir/run/agent.sock" \
	--model "$ARCH-gpu" --gpus 1 --max-cpus "$MAX_CPUS" --point-seconds "$POINT_SECONDS" \
	"${signal[@]}" --dataset data -- \
	"$PY" "$dir/train_image.py" --data data --device "$DEVICE" --arch "$ARCH" 2>&1 | tr '\r' '\n' | tee "$OUT/profile.txt"
kill $scraper
echo "== GPU utilisation read through go-nvml during the sweep (max per scrape)"
grep utilization "$OUT/metrics-during-sweep.txt" | awk '{print $NF}' | tr '\n' ' '; echo
[ "$DEVICE" = cpu ] || nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
