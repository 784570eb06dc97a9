#!/usr/bin/env bash
# Multi-GPU guests on shares (Slurm 23.11+'s MULTIPLE_SHARING_GRES_PJ;
# docs/evaluation/README.md, section 8.1): the runs of section 8 where
# useful utilisation fell with sharing on (SHARING_ROWS, section 8's
# rows.csv), with promote_after 4h (the default; the 1h and 16h runs are
# left out to fit the shared machine), run again with -sharing
# off,on,multi: multi is on with multi-GPU opportunistic jobs also guests
# on shares of several GPUs of one node. The VC slices on their section-8
# pools (-gpu-count-only: one pool without nodes, so a guest may span any
# hosts' GPUs there, an upper bound on what one node allows); the four
# weeks as in section 8, on 64 nodes x 8 GPUs, where a guest's hosts
# share a node. Then, to see what it does where sharing gains, the week of
# section 8 (2017-10-02, 16 x 8 GPUs counted as one pool, both request
# mixes, seeds 1-3, the four policies).
#
# Writes OUT/sharing-multi/rows.csv (one row per run: useful utilisation,
# guaranteed average JCT and work for off, on and multi, multi-GPU guests
# placed and requeued when a host ended) and OUT/sharing-multi/summary.md.
set -euo pipefail
B=${B:-bin/lachesis-sim}
P=${PHILLY:?}
OUT=${OUT:?}
SHARING_ROWS=${SHARING_ROWS:-docs/evaluation/results/sharing/rows.csv}
mkdir -p "$OUT/sharing-multi"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=$OUT/sharing-multi/rows.csv
echo "slice,load,gpus,gpus_per_node,mix,seed,policy,useful_util_off,useful_util_on,useful_util_multi,guaranteed_jct_off_s,guaranteed_jct_on_s,guaranteed_jct_multi_s,work_off,work_on,work_multi,pairs_on,pairs_multi,multi_gpu_guests,host_ended" > "$rows"

# row SLICE LOAD GPUS PER_NODE MIX SEED: appends the off/on/multi runs of $tmp/summary.json.
row() {
	python3 - "$@" "$tmp/summary.json" >> "$rows" <<'PY'
import json,sys
*lead,path=sys.argv[1:]
runs={r['label']:r for r in json.load(open(path))['sharing']}
for label,off in runs.items():
    if not label.endswith('/sharing-off'): continue
    base=label[:-len('/sharing-off')]
    on,mu=runs[base+'/sharing-on'],runs[base+'/sharing-multi']
    f=lambda v: f"{v:.4f}" if isinstance(v,float) else str(v)
    print(','.join(lead+[base]+[f(x) for x in [
        off['useful_util'],on['useful_util'],mu['useful_util'],
        off['guaranteed']['avg_jct_s'],on['guaranteed']['avg_jct_s'],mu['guaranteed']['avg_jct_s'],
        off['work_gpu_hours'],on['work_gpu_hours'],mu['work_gpu_hours'],
        on['pairs'],mu['pairs'],mu['multi_gpu_guests'],mu['host_ended']]]))
PY
}

# The section-8 runs where useful utilisation fell, promote_after 4h: one
# line per sim invocation, with the policies that fell in it.
python3 - "$SHARING_ROWS" > "$tmp/fell.txt" <<'PY'
import csv,sys,collections
inv=collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r['promote_after']=='4h' and float(r['useful_util_on'])<float(r['useful_util_off']):
        inv[(r['slice'],r['load'],r['gpus'],r['mix'],r['seed'])].append(r['policy'])
for k,v in sorted(inv.items()):
    print(*k, ','.join(v))
PY

while read -r slice load gpus mix seed policies; do
	m=()
	[ "$mix" = philly ] || m=(-gpu-mix "$mix")
	if [ "$slice" = month-2017-10 ]; then
		nice $B -trace "$P" -from 2017-10-02 -to 2017-10-30 -nodes 64 -gpus-per-node 8 -cpus-per-node 24 -mem-per-node 500 \
			-policies "$policies" -parallel 2 -sharing off,on,multi -opportunistic 0.2 -seed "$seed" "${m[@]}" -out "$tmp" >/dev/null
		row "$slice" "$load" "$gpus" 8 "$mix" "$seed"
		continue
	fi
	nice $B -trace "$P" -vc "$slice" -jobs 1000 -gpu-count-only -nodes "$gpus" -gpus-per-node 1 -policies "$policies" \
		-sharing off,on,multi -opportunistic 0.2 -seed "$seed" -promote-after 4h "${m[@]}" -parallel 2 -out "$tmp" >/dev/null
	row "$slice" "$load" "$gpus" pool "$mix" "$seed"
done < "$tmp/fell.txt"

for mix in philly pai2020; do
	m=()
	[ $mix = philly ] || m=(-gpu-mix $mix)
	for seed in 1 2 3; do
		nice $B -trace "$P" -from 2017-10-02 -to 2017-10-09 -gpu-count-only -nodes 16 -gpus-per-node 8 \
			-policies fifo-skip,fifo,las,gittins -parallel 2 -sharing off,on,multi -opportunistic 0.2 -seed $seed "${m[@]}" -out "$tmp" >/dev/null
		row week-2017-10-02 - 128 pool $mix $seed
	done
done

python3 - "$rows" > "$OUT/sharing-multi/summary.md" <<'PY'
import csv,sys,collections
rows=list(csv.DictReader(open(sys.argv[1])))
g=lambda r,c: float(r[c])
by=collections.defaultdict(list)
for r in rows:
    sl=r['slice']
    by['week, one pool of 128 (all runs)' if sl.startswith('week') else 'four weeks, 64 x 8 GPUs' if sl.startswith('month') else 'VC slices, one pool (upper bound)'].append(r)
print('| runs of | runs | useful util fell (on < off) | of those, no longer falls with multi (multi >= off) | multi differs from on | useful util on → multi (mean; largest change, points) | multi-GPU guests (sum) | requeued when a host ended (sum) | guaranteed JCT multi/on (mean, worst) |')
print('|---|---:|---:|---:|---:|---|---:|---:|---|')
for k,v in sorted(by.items()):
    fell=[r for r in v if g(r,'useful_util_on')<g(r,'useful_util_off')]
    fixed=[r for r in fell if g(r,'useful_util_multi')>=g(r,'useful_util_off')]
    diff=sum(1 for r in v if r['useful_util_multi']!=r['useful_util_on'] or r['guaranteed_jct_multi_s']!=r['guaranteed_jct_on_s'])
    rat=[g(r,'guaranteed_jct_multi_s')/g(r,'guaranteed_jct_on_s') for r in v]
    du=[100*(g(r,'useful_util_multi')-g(r,'useful_util_on')) for r in v]
    big=max(du,key=abs)
    print(f"| {k} | {len(v)} | {len(fell)} | {len(fixed)} | {diff} | {100*sum(g(r,'useful_util_on') for r in v)/len(v):.2f}% → {100*sum(g(r,'useful_util_multi') for r in v)/len(v):.2f}% ({big:+.2f}) | {sum(int(r['multi_gpu_guests']) for r in v)} | {sum(int(r['host_ended']) for r in v)} | {sum(rat)/len(rat):.4f}, {max(rat):.4f} |")
PY
cat "$OUT/sharing-multi/summary.md"
