#!/usr/bin/env bash
# Regenerates docs/evaluation/results/: every table, ratio and plot quoted in
# docs/evaluation/README.md. Run from anywhere in the repository:
#
#     bash docs/evaluation/run.sh
#
# DATA (default: data, the repository's own copy) and OUT
# (default: docs/evaluation/results) may be overridden. About 10 minutes on
# 2 cores, plus about 10 for section 8 (GPU sharing) and 20 for 8.1 (on a
# machine shared at a load of 10 to 20). Everything but bench.txt (wall time, memory) is deterministic.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
DATA=${DATA:-data}
OUT=${OUT:-docs/evaluation/results}
GO=${GO:-go}

mkdir -p bin "$OUT"
CGO_ENABLED=0 $GO build -o bin/lachesis-sim ./cmd/lachesis-sim
: > "$OUT/commands.txt"

# sim NAME ARGS...: runs the simulator, keeps its table in OUT/NAME/stdout.txt
# and the command line in OUT/commands.txt.
sim() {
	local name=$1
	shift
	mkdir -p "$OUT/$name"
	{
		printf 'bin/lachesis-sim -profiles %q' "$DATA/synergy/synergy_model_throughput.csv"
		printf ' %q' "$@"
		printf '\n'
	} >>"$OUT/commands.txt"
	echo "== $name"
	bin/lachesis-sim -profiles "$DATA/synergy/synergy_model_throughput.csv" "$@" | tee "$OUT/$name/stdout.txt"
}

PHILLY=$DATA/philly/philly_jobs.csv
# The evaluation slice: the four busiest weeks of the trace, Monday
# 2017-10-02 to Monday 2017-10-30 (UTC), 45,065 jobs, on 64 nodes × 8 GPUs
# (24 CPUs, 500 GB each, the servers of the Synergy profiles).
SLICE=(-trace "$PHILLY" -from 2017-10-02 -to 2017-10-30 -nodes 64 -gpus-per-node 8 -cpus-per-node 24 -mem-per-node 500)
# Sections 1-4 were written before preemption costs and the preemption
# rule existed: they keep free preemption (no hold, leftover GPUs reused,
# restart penalty only where named) and the paper's rule, so they
# reproduce their tables; nor do they group sweeps (-sibling-window 0,
# added with it in section 5). Sections 5b-5e run with the real costs on.
FREE=(-restart-penalty 0 -requeue-hold 0 -partial-node-idle=false -min-run 0 -max-preemptions 0 -promoted-preempts
	-spread-victims=false -sibling-window 0)
SLICE+=("${FREE[@]}")
# Lachesis's former defaults, from the sweep below.
LACHESIS=(-thresholds 3250,32500,325000,3250000 -promote-knob 2)
# The defaults before sweeps (sections 3b and 3d were measured with them;
# each also has a run at today's defaults).
PREV=(-threshold-quantiles 0.5,0.9,0.99 -sibling-window 0)

# 1. Every policy, both allocations, papers' assumptions (no restart
#    penalty), 2D-LAS/2D-Gittins at the reference simulator's settings.
sim philly-oct "${SLICE[@]}" -policies all -alloc proportional,synergy,start \
	-thresholds 3250,7200 -promote-knob 0 -out "$OUT/philly-oct" \
	-title "Philly Oct 2017, 45,065 jobs, 64 x 8 GPUs"

# 2. The same with a Slurm-like restart penalty for preempted jobs.
sim philly-oct-penalty60 "${SLICE[@]}" -policies srtf,las,gittins -alloc proportional \
	-thresholds 3250,7200 -promote-knob 0 -restart-penalty 60s -out "$OUT/philly-oct-penalty60" \
	-title "Philly Oct 2017, restart penalty 60 s"

# 3. Lachesis's recommended defaults (2D-Gittins), with and without the
#    penalty, both allocations.
sim philly-oct-lachesis "${SLICE[@]}" -policies gittins -alloc proportional,synergy \
	"${LACHESIS[@]}" -out "$OUT/philly-oct-lachesis" -title "Philly Oct 2017, Lachesis defaults"
sim philly-oct-lachesis-penalty60 "${SLICE[@]}" -policies gittins -alloc proportional,synergy \
	"${LACHESIS[@]}" -restart-penalty 60s -out "$OUT/philly-oct-lachesis-penalty60" \
	-title "Philly Oct 2017, Lachesis defaults, restart penalty 60 s"

# 3b. Synergy's reserve knob: how much of the proportional share a node keeps
#     for its other free GPUs (1 = all of it, the default).
for reserve in 0.5 0; do
	sim "philly-oct-synergy-reserve$reserve" "${SLICE[@]}" -policies fifo-skip,las -alloc synergy \
		-thresholds 3250,7200 -promote-knob 0 -reserve "$reserve" -out "$OUT/philly-oct-synergy-reserve$reserve" \
		-title "Philly Oct 2017, Synergy, reserve $reserve"
done

# 4. Cross-check against the Tiresias reference simulator: 60_job.csv on
#    4 × 4 GPUs counted as a pool, K=3, 3250/7200 GPU-s, no promotion,
#    demotions acted on at the second they happen.
CROSS=("${FREE[@]}" -trace "$DATA/tiresias/60_job.csv" -gpu-count-only -nodes 4 -gpus-per-node 4
	-pass-interval 0 -thresholds 3250,7200 -promote-knob 0 -models given)
for scale in 1 20; do
	sim "crosscheck-x$scale" "${CROSS[@]}" -duration-scale "$scale" -policies fifo,fifo-skip,srtf,las,gittins \
		-out "$OUT/crosscheck-x$scale" -title "60_job.csv x$scale, 16 GPUs"
	sim "crosscheck-x$scale-reference-preemption" "${CROSS[@]}" -duration-scale "$scale" \
		-policies las,gittins -reference-preemption -out "$OUT/crosscheck-x$scale-reference-preemption" \
		-title "60_job.csv x$scale, reference preemption"
done

# 5. The sensitivity sweep that chose the defaults: the slice on 512 and
#    384 GPUs (offered load ≈0.85 and ≈1.1), 60 s restart penalty, the
#    core's 30 s pass interval.
sim sweep "${SLICE[@]}" -sweep -sweep-nodes 64,48 -restart-penalty 60s -out "$OUT/sweep"

# 5b. Heterogeneous clusters (Gavel's throughputs): the same slice on three
#     GPU types in equal node groups (K80, P100, V100; trace durations taken
#     as P100 times), 2D-Gittins at Lachesis's defaults, type-agnostic vs
#     effective-throughput, consolidation of placement-sensitive jobs on vs
#     off. 72 nodes (576 GPUs) is the headline; 48 and 96 nodes show how the
#     gains move with load. Real costs on (the simulator's defaults).
HETERO=(-trace "$PHILLY" -from 2017-10-02 -to 2017-10-30 -gpus-per-node 8 -cpus-per-node 24 -mem-per-node 500
	-policies gittins -hetero k80,p100,v100 -gavel "$DATA/gavel/throughputs.csv" -hetero-ref p100)
for nodes in 72 48 96; do
	sim "hetero-$nodes" "${HETERO[@]}" "${PREV[@]}" -nodes "$nodes" \
		-out "$OUT/hetero-$nodes" -title "Philly Oct 2017, $nodes x 8 GPUs of K80/P100/V100"
done
sim hetero-72-defaults "${HETERO[@]}" -nodes 72 -out "$OUT/hetero-72-defaults" \
	-title "Philly Oct 2017, 72 x 8 GPUs of K80/P100/V100, today's defaults"

# 6. Synergy's own workload (the Synergy simulator's job lists, regenerated
#    from its published rules: Poisson arrivals, Gavel's durations, one GPU
#    per job, 20/70/10 image/language/speech models) on its 16 × 8-GPU
#    cluster at 9 and 12 jobs/h, three seeds, FIFO, measured as it measures
#    (average JCT of jobs 4000-4999). Then the same with its multi-GPU mix.
#    The lists themselves: bin/lachesis-sim synergy-jobs -rate R -seed S.
# synergy NAME ARGS...: a synergy-replay run, recorded like sim's.
synergy() {
	local name=$1
	shift
	mkdir -p "$OUT/$name"
	{
		printf 'bin/lachesis-sim synergy-replay -profiles %q' "$DATA/synergy/synergy_model_throughput.csv"
		printf ' %q' "$@"
		printf '\n'
	} >>"$OUT/commands.txt"
	echo "== $name"
	bin/lachesis-sim synergy-replay -profiles "$DATA/synergy/synergy_model_throughput.csv" "$@" | tee "$OUT/$name/stdout.txt"
}
synergy synergy-joblists -rates 9,12 -seeds 1,2,3 -policies fifo -reserves 1,0 -out "$OUT/synergy-joblists"
synergy synergy-joblists-multigpu -multi-gpu -rates 9,12 -seeds 1,2,3 -policies fifo -reserves 1 \
	-out "$OUT/synergy-joblists-multigpu"
# 6b. Start-time sizing (what slurmctld runs, sim's AllocStart) against the
#     placement-time allocator, on the five lists issue 24 names (6, 9 and
#     12 jobs/h with seed 42; 9 jobs/h with seeds 1 and 2) and held-out
#     seeds 3-8, under FIFO and 2D-LAS (2D-Gittins does not drain at 9
#     jobs/h: later arrivals keep overtaking the window's jobs). About 7
#     minutes, most of it 2D-LAS.
synergy synergy-joblists-start -rates 6,9,12 -seeds 42,1,2,3,4,5,6,7,8 -policies fifo -reserves 1 \
	-out "$OUT/synergy-joblists-start"
synergy synergy-joblists-start-las -rates 9,12 -seeds 42,1,2,3,4,5,6,7,8 -policies las -reserves 1 \
	-out "$OUT/synergy-joblists-start-las"
# 6c. The five lists of issue 24 as the Synergy simulator itself draws them
#     (-draws synergy: CPython's generator seeded as its runner seeds it,
#     the durations its runner ships; checked job for job against its own
#     generator), under FIFO and 2D-LAS; then the bound where every job
#     runs at its best case (nodes of 2,400 CPUs and 50,000 GB, so nothing
#     is ever short; that run's proportional column is not a baseline).
synergy synergy-joblists-exact -draws synergy -rates 6,9,12 -seeds 42,1,2 -policies fifo,las -reserves 1 \
	-out "$OUT/synergy-joblists-exact"
synergy synergy-joblists-exact-bound -draws synergy -rates 6,9,12 -seeds 42,1,2 -policies fifo -reserves 1 \
	-cpus-per-node 2400 -mem-per-node 50000 -out "$OUT/synergy-joblists-exact-bound"

# 5c. Issue 11's busy slice: the first 1,000 jobs of VC 6c71a0 on 8 x 4
#     GPUs (offered load 1.8), real costs on (the simulator's defaults:
#     60 s restart, 121 s requeue hold, 30 s passes, idle leftover GPUs).
I11=(-trace "$PHILLY" -vc 6c71a0 -jobs 1000 -gpu-count-only -nodes 8 -gpus-per-node 4 -jobs-csv)
sim 6c71a0-defaults "${I11[@]}" -policies fifo,srtf,las,gittins -out "$OUT/6c71a0-defaults"
sim 6c71a0-no-sweeps "${I11[@]}" -policies las,gittins -sibling-window 0 -out "$OUT/6c71a0-no-sweeps"
sim 6c71a0-previous-defaults "${I11[@]}" -policies las,gittins "${PREV[@]}" -out "$OUT/6c71a0-previous-defaults"
sim 6c71a0-reference-thresholds "${I11[@]}" -policies las,gittins -thresholds 3250,7200 -promote-knob 0 \
	-out "$OUT/6c71a0-reference-thresholds"
sim 6c71a0-reference-preemption "${I11[@]}" -policies las,gittins -thresholds 3250,7200 -promote-knob 0 \
	-reference-preemption -out "$OUT/6c71a0-reference-preemption"
sim 6c71a0-reference-nocosts "${I11[@]}" -policies srtf,las,gittins -thresholds 3250,7200 -promote-knob 0 \
	-reference-preemption -restart-penalty 0 -requeue-hold 0 -pass-interval 0 -partial-node-idle=false \
	-out "$OUT/6c71a0-reference-nocosts"
# 5d. The preemption sweep that chose the preemption defaults.
PHILLY=$PHILLY OUT=$OUT nice bash docs/evaluation/preempt-sweep.sh
# 5e. The defaults on slices they were not chosen on.
SET=heldout PHILLY=$PHILLY OUT=$OUT nice bash docs/evaluation/preempt-sweep.sh

# 6b. Fair share between accounts (a job's account is its virtual cluster,
#     equal shares, the core's 7-day half-life): the first week of the
#     slice on 16 x 8 GPUs (a pool), real costs, 2D-Gittins at Lachesis's
#     defaults, with and without fair share, and the per-account table.
FSWEEK=(-trace "$PHILLY" -from 2017-10-02 -to 2017-10-09 -gpu-count-only -nodes 16 -gpus-per-node 8
	-policies fifo-skip,gittins -fairshare both)
sim fairshare-week "${FSWEEK[@]}" "${PREV[@]}" -out "$OUT/fairshare-week" \
	-title "Philly 2017-10-02 to 10-09, 16 x 8 GPUs, fair share between VCs"
sim fairshare-week-defaults "${FSWEEK[@]}" -out "$OUT/fairshare-week-defaults" \
	-title "Philly 2017-10-02 to 10-09, 16 x 8 GPUs, fair share between VCs, today's defaults"

# 8. GPU sharing between guaranteed and opportunistic jobs (issue 22):
#    sharing off vs on on four VCs' slices at two loads, Philly's and
#    Alibaba PAI 2020's GPU requests, three seeds, three promote_after
#    values, and the week of 2017-10-02.
PHILLY=$PHILLY OUT=$OUT nice bash docs/evaluation/sharing.sh
# 8.1 Multi-GPU guests on shares (Slurm 23.11+): the runs above where
#    useful utilisation fell, and the week, with -sharing off,on,multi.
SHARING_ROWS=$OUT/sharing/rows.csv PHILLY=$PHILLY OUT=$OUT nice bash docs/evaluation/sharing-multi.sh

# 9. Guaranteed quotas in affinity cells (issue 35; sim/quotasim): the
#    Philly VCs as accounts, each with a quota from its share of the
#    slice's GPU time in cells (whole nodes, or the largest buddy cell it
#    fills), on 8-GPU nodes under switches of 8. Today's defaults, fair
#    share only, quotas without cells and quotas in cells on the shared
#    cluster; each account alone on a private cluster of its cells. The
#    four-week slice at two loads (64 and 48 nodes, as section 3), then
#    the overloaded first week on 16 nodes (section 3d's setting). About
#    4 minutes on 2 busy cores, two simulations at once.
# quotasim NAME ARGS...: a quota run, recorded like sim's.
quotasim() {
	local name=$1
	shift
	mkdir -p "$OUT/$name"
	{
		printf 'bin/lachesis-sim quota'
		printf ' %q' "$@"
		printf '\n'
	} >>"$OUT/commands.txt"
	echo "== $name"
	nice bin/lachesis-sim quota -parallel 2 "$@" -out "$OUT/$name" | tee "$OUT/$name/stdout.txt"
}
quotasim quota-64 -trace "$PHILLY" -from 2017-10-02 -to 2017-10-30 -nodes 64 \
	-title "Philly Oct 2017, 64 x 8 GPUs, quotas from each VC's share"
quotasim quota-48 -trace "$PHILLY" -from 2017-10-02 -to 2017-10-30 -nodes 48 \
	-title "Philly Oct 2017, 48 x 8 GPUs, quotas from each VC's share"
quotasim quota-week16 -trace "$PHILLY" -from 2017-10-02 -to 2017-10-09 -nodes 16 \
	-title "Philly 2017-10-02 to 10-09, 16 x 8 GPUs, quotas from each VC's share"

# 7. Speed: the whole trace (78,802 jobs) on 512 GPUs with 2D-Gittins, one
#    simulation on one core.
sim bench -trace "$PHILLY" -nodes 64 -gpus-per-node 8 -policies gittins -parallel 1 -bench \
	| tee "$OUT/bench.txt" >/dev/null
echo "results in $OUT"
