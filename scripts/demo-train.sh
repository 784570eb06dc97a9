#!/usr/bin/env bash
# A stand-in for a training job that checkpoints: it "trains" for WORK
# seconds in total at the speed of the GPU-proportional share, saving its
# progress to CKPT so a job that Slurm requeues (Tiresias preempts by
# requeueing) resumes where it was.
#
# SPEEDS (optional) emulates a model's sensitivity to CPUs, e.g.
# "1:0.4,3:1,6:1.6": with c CPUs per GPU the job runs at the speed of the
# largest entry <= c (relative to the share). The CPUs per GPU are what
# Slurm allocated: SLURM_JOB_CPUS_PER_NODE over the GPUs the job sees.
# Usage: demo-train.sh CKPT WORK [SPEEDS]
set -euo pipefail
ckpt=$1 work=$2 speeds=${3:-}

cpus=${SLURM_JOB_CPUS_PER_NODE:-1}
cpus=${cpus%%(*}            # "4(x2)" -> 4
gpus=1
if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
  IFS=, read -ra dev <<<"$CUDA_VISIBLE_DEVICES"
  gpus=${#dev[@]}
fi
rate=1000 # progress per second in thousandths of the share's speed
if [[ -n $speeds ]]; then
  rate=$(awk -v c="$((cpus / gpus))" -v t="$speeds" 'BEGIN {
    r = 0; n = split(t, e, ",")
    for (i = 1; i <= n; i++) { split(e[i], kv, ":"); if (kv[1] + 0 <= c) r = kv[2] }
    if (r <= 0) { split(e[1], kv, ":"); r = kv[2] }
    printf "%d", r * 1000 }')
fi
echo "cpus_per_gpu=$((cpus / gpus)) speed=${rate}/1000"

done_ms=$(cat "$ckpt" 2>/dev/null || echo 0)
while ((done_ms < work * 1000)); do
  left=$((work * 1000 - done_ms))
  if ((left < rate)); then
    # The last step is the fraction of a second the rest takes at this
    # speed, so a job runs WORK / speed seconds, as the simulator's do,
    # not that rounded up to whole seconds.
    ms=$((left * 1000 / rate))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    done_ms=$((work * 1000))
  else
    sleep 1
    done_ms=$((done_ms + rate))
  fi
  echo "$done_ms" >"$ckpt"
done
