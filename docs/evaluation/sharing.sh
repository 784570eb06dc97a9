#!/usr/bin/env bash
# GPU sharing between guaranteed and opportunistic jobs, off vs on (issue
# 22; docs/evaluation/README.md, section 8): the first 1,000 jobs of four
# Philly VCs (the preemption sweep's slices) on pools sized for offered
# loads 0.8 and 1.3, 2D-Gittins at today's defaults, 2D-LAS, FIFO-skip
# and strict FIFO, seeds
# 1-3 (a seed draws the jobs' models and which jobs are opportunistic:
# 20% of them, sim.MarkOpportunistic), real preemption costs, Gavel's V100
# pair table. Two GPU-request mixes: Philly's own (whole GPUs) and Alibaba
# PAI 2020's (-gpu-mix pai2020: a share of one GPU for 54% of jobs), and
# the opportunistic rule: new (the default: opportunistic jobs ranked
# among all jobs) and strict (-strict-opportunistic: behind every
# guaranteed job), each against sharing off in the same run. Then the week
# of 2017-10-02 on 16 x 8 GPUs, and one run where the scheduler starts
# with an empty pair table (-sharing-learn). PROMOTES (default 4h; the
# first sweep also ran 1h and 16h) lists the promote_after values, SEEDS
# (default 1 2 3) and WEEK_SEEDS (default SEEDS) the seeds; MONTH=1
# adds the four weeks of sections 1-3 on 64 x 8 GPUs (with CPUs and
# memory), offered load about 0.7, where sharing changed little.
#
# Writes OUT/sharing/rows.csv (one row per slice, seed, mix, promote_after,
# rule and policy: on/off ratios and both runs' figures) and
# OUT/sharing/summary.md. Called by run.sh with bin/lachesis-sim built;
# about 50 minutes on 2 shared cores.
set -euo pipefail
B=bin/lachesis-sim
P=${PHILLY:?}
OUT=${OUT:?}
POLICIES=fifo-skip,fifo,las,gittins
PROMOTES=${PROMOTES:-4h}
SEEDS=${SEEDS:-1 2 3}
WEEK_SEEDS=${WEEK_SEEDS:-$SEEDS}
RULES=(new strict)
mkdir -p "$OUT/sharing"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=$OUT/sharing/rows.csv
echo "slice,load,gpus,mix,seed,promote_after,rule,policy,guaranteed_jct_ratio,opp_jct_ratio,all_jct_ratio,evicted_per_opp,opp_jobs,all_jct_off_s,all_jct_on_s,useful_util_off,useful_util_on,alloc_util_off,alloc_util_on,work_ratio,guaranteed_jct_off_s,guaranteed_jct_on_s,guaranteed_first_start_off_s,guaranteed_first_start_on_s,opp_jct_off_s,opp_jct_on_s,opp_first_start_off_s,opp_first_start_on_s,opp_done_in_window_off,opp_done_in_window_on,evicted,reverted,host_preempted,moved,promoted,pairs,idle_util_off,idle_util_on,idle_while_guar_waits_off,idle_while_guar_waits_on,idle_while_opp_waits_on" > "$rows"

# row SLICE LOAD GPUS MIX SEED PROMOTE RULE: appends the on/off pairs of $tmp/summary.json.
row() {
	python3 - "$@" "$tmp/summary.json" >> "$rows" <<'PY'
import json,sys
*lead,path=sys.argv[1:]
d=json.load(open(path))
runs={r['label']:r for r in d['sharing']}
for label,off in runs.items():
    if not label.endswith('/sharing-off'): continue
    on=runs[label.replace('/sharing-off','/sharing-on')]
    g0,g1,o0,o1=off['guaranteed'],on['guaranteed'],off['opportunistic'],on['opportunistic']
    f=lambda v: f"{v:.4f}" if isinstance(v,float) else str(v)
    # All jobs' average JCT: the classes' averages weighted by their jobs.
    alljct=lambda r: (r['guaranteed']['jobs']*r['guaranteed']['avg_jct_s']+r['opportunistic']['jobs']*r['opportunistic']['avg_jct_s'])/(r['guaranteed']['jobs']+r['opportunistic']['jobs'])
    print(','.join(lead+[label.split('/')[0]]+[f(x) for x in [
        g1['avg_jct_s']/g0['avg_jct_s'], o1['avg_jct_s']/o0['avg_jct_s'], alljct(on)/alljct(off), on['evicted']/max(1,o1['jobs']), o1['jobs'],
        alljct(off), alljct(on), off['useful_util'], on['useful_util'], off['alloc_util'], on['alloc_util'],
        on['work_gpu_hours']/off['work_gpu_hours'], g0['avg_jct_s'], g1['avg_jct_s'],
        g0['avg_first_start_s'], g1['avg_first_start_s'], o0['avg_jct_s'], o1['avg_jct_s'],
        o0['avg_first_start_s'], o1['avg_first_start_s'], o0['finished_in_window'], o1['finished_in_window'],
        on['evicted'], on['reverted'], on['host_preempted'], on['moved'], on['promoted'], on['pairs'],
        off['idle_util'], on['idle_util'], off['idle_while_guar_waits'], on['idle_while_guar_waits'], on['idle_while_opp_waits']]]))
PY
}

for vc in 6c71a0 11cb48 6214e9 b436b2; do
	sel=(-trace "$P" -vc $vc -jobs 1000 -gpu-count-only)
	for mix in philly pai2020; do
		m=()
		[ $mix = philly ] || m=(-gpu-mix $mix)
		for load in 0.8 1.3; do
			# Pool size for the load, from the slice's GPU-hours and span
			# (with the mix's requests: a share counts as a whole GPU, as
			# without sharing).
			hdr=$($B "${sel[@]}" -nodes 1 -gpus-per-node 4096 -policies fifo-skip -parallel 1 -sharing off "${m[@]}" | grep -E '^(trace|sharing: GPU)')
			# At least the slice's largest job (its pool may then be less
			# loaded than asked; the load column says what it is).
			read gpus load <<<"$(python3 - "$hdr" $load "$P" $vc <<'PY'
import sys,re,csv
h,load,path,vc=sys.argv[1],float(sys.argv[2]),sys.argv[3],sys.argv[4]
gh=float(re.findall(r'(\d+) GPU-hours',h)[-1])
m=re.search(r'over (\S+);',h).group(1)
sec=sum(int(v)*{'d':86400,'h':3600,'m':60,'s':1}[u] for v,u in re.findall(r'(\d+)([dhms])',m))
jobs=sorted((r['timestamp'],int(r['num_gpus'])) for r in csv.DictReader(open(path)) if r['cluster']==vc)[:1000]
g=max(max(1,round(gh*3600/sec/load)),max(n for _,n in jobs))
print(g, f"{gh*3600/sec/g:.2f}")
PY
)"
			for seed in $SEEDS; do
				for pa in $PROMOTES; do
					for rule in "${RULES[@]}"; do
						nice $B "${sel[@]}" -nodes $gpus -gpus-per-node 1 -policies $POLICIES -sharing off,on \
							-opportunistic 0.2 -seed $seed -promote-after $pa "${m[@]}" -strict-opportunistic=$([ $rule = strict ] && echo true || echo false) \
							-parallel 2 -out "$tmp" >/dev/null
						row $vc $load $gpus $mix $seed $pa $rule
					done
				done
			done
		done
	done
done
# The week of 2017-10-02 (11,208 jobs) on 16 x 8 GPUs, default promote_after.
for mix in philly pai2020; do
	m=()
	[ $mix = philly ] || m=(-gpu-mix $mix)
	for seed in $WEEK_SEEDS; do
		for rule in "${RULES[@]}"; do
			nice $B -trace "$P" -from 2017-10-02 -to 2017-10-09 -gpu-count-only -nodes 16 -gpus-per-node 8 \
				-policies $POLICIES -parallel 2 -sharing off,on -opportunistic 0.2 -seed $seed "${m[@]}" \
				-strict-opportunistic=$([ $rule = strict ] && echo true || echo false) -out "$tmp" >/dev/null
			row week-2017-10-02 - 128 $mix $seed 4h $rule
		done
	done
done
# The evaluation slice of sections 1-3 (2017-10-02 to 10-30, 45,065 jobs)
# on 64 nodes x 8 GPUs with CPUs and memory, proportional allocation.
[ "${MONTH:-0}" = 1 ] && for mix in philly pai2020; do
	m=()
	[ $mix = philly ] || m=(-gpu-mix $mix)
	for seed in 1 2 3; do
		for rule in "${RULES[@]}"; do
			nice $B -trace "$P" -from 2017-10-02 -to 2017-10-30 -nodes 64 -gpus-per-node 8 -cpus-per-node 24 -mem-per-node 500 \
				-policies $POLICIES -parallel 2 -sharing off,on -opportunistic 0.2 -seed $seed "${m[@]}" \
				-strict-opportunistic=$([ $rule = strict ] && echo true || echo false) -out "$tmp" >/dev/null
			row month-2017-10 - 512 $mix $seed 4h $rule
		done
	done
done
# Introspection alone: the scheduler starts with an empty pair table.
nice $B -trace "$P" -vc 6c71a0 -jobs 1000 -gpu-count-only -nodes 32 -gpus-per-node 1 -policies $POLICIES -parallel 2 \
	-sharing off,on -opportunistic 0.2 -sharing-learn -out "$tmp" | tee "$OUT/sharing/learn.txt" >/dev/null
row 6c71a0-learn - 32 philly 1 4h new

python3 - "$rows" > "$OUT/sharing/summary.md" <<'PY'
import csv,sys,collections
rows=list(csv.DictReader(open(sys.argv[1])))
by=collections.defaultdict(list)
for r in rows:
    sl=r['slice']
    key=(r['mix'],r['promote_after'],r['rule'],r['policy'],'week' if sl.startswith('week') else 'month' if sl.startswith('month') else 'learn' if 'learn' in sl else 'VCs')
    by[key].append(r)
print('Sharing on against off in one run (ratios on/off; the acceptance bounds: guaranteed JCT ≤ 1.05, opportunistic JCT ≤ 1.5, all jobs ≤ 1.00, useful utilisation up).')
print()
print('| requests | promote_after | rule | policy | slices | runs | guaranteed JCT: mean | worst | runs > 1.05 | opp. JCT: mean | worst | runs > 1.5 | all jobs\' JCT: mean | worst | runs > 1.00 | useful util off → on (mean) | runs where it rose | evictions per opp. job (mean; most) | opp. JCT off → on (mean, h) | opp. first start off → on (mean, h) | promoted (mean) | pairs (mean) |')
print('|---|---|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---|---:|---|---:|---|---|---|---:|---:|')
for k in sorted(by):
    v=by[k]; n=len(v)
    mean=lambda c: sum(float(r[c]) for r in v)/n
    def worst(c):
        w=max(v,key=lambda r: float(r[c]))
        return f"{float(w[c]):.3f} ({w['slice']}, {w['load']}, {w['seed']})"
    over=lambda c,b: sum(1 for r in v if float(r[c])>b+1e-9)
    rose=sum(1 for r in v if float(r['useful_util_on'])>float(r['useful_util_off']))
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {n} | {mean('guaranteed_jct_ratio'):.3f} | {worst('guaranteed_jct_ratio')} | {over('guaranteed_jct_ratio',1.05)} | "
          f"{mean('opp_jct_ratio'):.3f} | {worst('opp_jct_ratio')} | {over('opp_jct_ratio',1.5)} | "
          f"{mean('all_jct_ratio'):.3f} | {worst('all_jct_ratio')} | {over('all_jct_ratio',1.0)} | "
          f"{100*mean('useful_util_off'):.1f}% → {100*mean('useful_util_on'):.1f}% | {rose}/{n} | "
          f"{mean('evicted_per_opp'):.2f}; {max(float(r['evicted_per_opp']) for r in v):.2f} | "
          f"{mean('opp_jct_off_s')/3600:.1f} → {mean('opp_jct_on_s')/3600:.1f} | {mean('opp_first_start_off_s')/3600:.2f} → {mean('opp_first_start_on_s')/3600:.2f} | "
          f"{mean('promoted'):.0f} | {mean('pairs'):.0f} |")
PY
cat "$OUT/sharing/summary.md"
