#!/usr/bin/env bash
# The preemption sweep behind priority.DefaultConfig's preemption rule and
# promote knob (docs/evaluation/README.md, section 5): the first 1,000 jobs
# of 4 Philly VCs, cluster sizes (GPUs, counted as a pool) giving offered
# loads 0.8, 1.3 and 1.8 (never fewer than the largest job needs), real preemption costs (the simulator's defaults), 2D-Gittins
# under the candidate settings below plus SRTF. Victims are spread
# (-spread-victims, the default) unless a candidate turns it off. Writes OUT/preempt-sweep/rows.csv:
# vc,load,nodes,setting,avg_jct_s,preemptions_per_job,p50,p99.
# Called by run.sh with bin/lachesis-sim built; ~2 minutes on 2 cores.
set -euo pipefail
B=bin/lachesis-sim
P=${PHILLY:?}
mkdir -p "$OUT/preempt-sweep"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$OUT/preempt-sweep/rows.csv
: > $out
# The fixed list of the former defaults; candidates without it take the
# thresholds at quantiles of completed jobs' GPU-time.
FIXED="-thresholds 3250,32500,325000,3250000"
declare -A CAND=(
 [old]="$FIXED -min-run 0 -max-preemptions 0 -promoted-preempts -promote-knob 2"
 [k0]="$FIXED -min-run 0 -max-preemptions 0 -promoted-preempts -promote-knob 0"
 [mr600k0]="$FIXED -min-run 600 -max-preemptions 0 -promote-knob 0"
 [mr600k2]="$FIXED -min-run 600 -max-preemptions 0 -promote-knob 2"
 [mr1800k2]="$FIXED -min-run 1800 -max-preemptions 0 -promote-knob 2"
 [mr600k2b20]="$FIXED -min-run 600 -max-preemptions 20 -promote-knob 2"
 [mr600k2g2]="$FIXED -min-run 600 -max-preemptions 0 -promote-knob 2 -queue-gap 2"
 [mr600k0q369]="-min-run 600 -max-preemptions 0 -promote-knob 0 -threshold-quantiles 0.3,0.6,0.9"
 [mr600k0q369l]="-min-run 600 -max-preemptions 0 -promote-knob 0 -threshold-quantiles 0.3,0.6,0.9 -gittins-learn 50"
 [mr600k0q5999]="-min-run 600 -max-preemptions 0 -promote-knob 0 -threshold-quantiles 0.5,0.9,0.99"
 [mr600k0q5999ns]="-min-run 600 -max-preemptions 0 -promote-knob 0 -threshold-quantiles 0.5,0.9,0.99 -spread-victims=false"
 [mr600k0q5999b10]="-min-run 600 -max-preemptions 10 -promote-knob 0 -threshold-quantiles 0.5,0.9,0.99"
 [mr600k0q5999l]="-min-run 600 -max-preemptions 0 -promote-knob 0 -threshold-quantiles 0.5,0.9,0.99 -gittins-learn 50"
 [mr600k0l]="$FIXED -min-run 600 -max-preemptions 0 -promote-knob 0 -gittins-learn 50"
 [mr1800k0]="$FIXED -min-run 1800 -max-preemptions 0 -promote-knob 0"
)
for vc in 6c71a0 11cb48 6214e9 b436b2; do
 hdr=$($B -trace $P -vc $vc -jobs 1000 -gpu-count-only -nodes 1 -gpus-per-node 64 -policies fifo-skip -parallel 1 | sed -n 1p)
 for load in 0.8 1.3 1.8; do
  nodes=$(python3 - "$hdr" $load <<'PY'
import sys,re
h,load=sys.argv[1],float(sys.argv[2])
gh=float(re.search(r'(\d+) GPU-hours',h).group(1))
m=re.search(r'over (\S+);',h).group(1)
sec=0
for v,u in re.findall(r'(\d+)([dhms])',m): sec+=int(v)*{'d':86400,'h':3600,'m':60,'s':1}[u]
print(max(1,round(gh*3600/sec/load)))
PY
)
  for c in srtf $(printf "%s\n" "${!CAND[@]}" | sort); do
   if [ $c = srtf ]; then a="-policies srtf"; else a="-policies gittins ${CAND[$c]}"; fi
   nice $B -trace $P -vc $vc -jobs 1000 -gpu-count-only -nodes $nodes -gpus-per-node 1 $a -parallel 1 -jobs-csv -out $tmp >/dev/null || { echo "fail $vc $c"; continue; }
   python3 - $vc $load $nodes $c "$tmp" >> $out <<'PY'
import csv,sys
rows=list(csv.DictReader(open(sys.argv[5]+'/jobs.csv')))
import math
p=sorted(int(r['preemptions']) for r in rows); n=len(p)
jct=sum(float(r['jct_s']) for r in rows)/n
# Percentiles by nearest rank, as the simulator's summary computes them.
rank=lambda q: p[max(1,math.ceil(q*n))-1]
print(','.join(sys.argv[1:5]+[f"{jct:.0f}",f"{sum(p)/n:.2f}",str(rank(0.5)),str(rank(0.99))]))
PY
  done
 done
done
