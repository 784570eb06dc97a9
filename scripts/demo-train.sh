#!/usr/bin/env bash
# A stand-in for a training job that checkpoints: it "trains" for WORK
# seconds in total, one second a step, saving its step count to CKPT so a job
# that Slurm requeues (Tiresias preempts by requeueing) resumes where it was.
# Usage: demo-train.sh CKPT WORK
set -euo pipefail
ckpt=$1 work=$2
step=$(cat "$ckpt" 2>/dev/null || echo 0)
while ((step < work)); do
  sleep 1
  step=$((step + 1))
  echo "$step" >"$ckpt"
done
