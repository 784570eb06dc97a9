#!/usr/bin/env bash
# Loopback Slurm test cluster for Lachesis: one slurmctld, N slurmds (all on
# 127.0.0.1, one port each, thanks to Debian's --enable-multiple-slurmd build),
# fake GPUs made of character devices, and a private munged. Everything lives
# under $LACHESIS_CLUSTER_DIR, so it never touches a system Slurm or munge.
#
# Usage: scripts/cluster.sh up|down|status|env|logs|restart-ctld
#
# Environment (all optional):
#   LACHESIS_CLUSTER_DIR   /tmp/lachesis-cluster
#   LACHESIS_NODES         4        nodes lnode1..lnodeN
#   LACHESIS_GPUS_PER_NODE 4
#   LACHESIS_GPU_TYPES     ""       typed GPUs in node groups, "a:2,b:2":
#                                   lnode1-2 get Gres=gpu:a:N Feature=gpu_a,
#                                   lnode3-4 Gres=gpu:b:N Feature=gpu_b (the
#                                   counts must add up to LACHESIS_NODES);
#                                   empty: untyped Gres=gpu:N, no features
#   LACHESIS_SHARDS_PER_GPU 0       >0: GresTypes=gpu,shard and each node
#                                   gets shard:GPUS*N, N on each fake GPU
#                                   (Slurm spreads them evenly), so jobs can
#                                   share a GPU with --gres=shard:K. A GPU is
#                                   allocated as gpu or as shards, never both
#   LACHESIS_LL_SHARED_GRES 0       1: SelectTypeParameters gets 23.11's
#                                   LL_SHARED_GRES (a job's shards from the
#                                   least loaded GPU first); 24.11 only; off
#                                   by default (docs/slurm-releases.md)
#   LACHESIS_MPS_PER_NODE  0        >0: GresTypes=gpu,mps and each node gets
#                                   mps:N, all on its first fake GPU (Slurm
#                                   22.05 gives MPS one GPU per node), so
#                                   jobs can share it with --gres=mps:K. A
#                                   GPU is allocated as gpu or as mps, never
#                                   both; not with LACHESIS_SHARDS_PER_GPU
#                                   (22.05 ties one shared gres to a GPU)
#   LACHESIS_GRES_CORES    0        1: gres.conf ties each node's GPUs to
#                                   its cores (Cores=), so slurmctld shows
#                                   the node's Gres with a socket suffix,
#                                   "gpu:4(S:0)"
#   LACHESIS_TOPOLOGY_CONF ""       file copied to etc/topology.conf, with
#                                   TopologyPlugin=topology/tree (its switches
#                                   name the lnodeK nodes)
#   LACHESIS_CPUS_PER_NODE 8
#   LACHESIS_MEM_PER_NODE  16000    MB
#   LACHESIS_PORT_BASE     16817    slurmctld port; node K listens on base+K
#   LACHESIS_PLUGIN_DIR    ""       prepended to Slurm's own PluginDir
#   LACHESIS_PRIORITY_TYPE priority/basic
#   LACHESIS_PREEMPT_TYPE  preempt/none
#   LACHESIS_JOB_SUBMIT    ""       JobSubmitPlugins (none when empty)
#   LACHESIS_EXTRA_CONF    ""       file appended verbatim to slurm.conf; a
#                                   plain Key=value there replaces the
#                                   generated line with the same key
#   LACHESIS_CONFIG_SRC    ""       copied to etc/lachesis.yaml
#   LACHESIS_SLURM_DEBUG   verbose  SlurmctldDebug/SlurmdDebug
#   LACHESIS_KEEP_STATE    0        1: `up` keeps state/ (jobs) of a previous run
#   LACHESIS_LOG_LINES     40       lines per log shown by `logs` and on failure
#   LACHESIS_CGROUPS       0        1: jobs get cgroups (proctrack/cgroup,
#                                   task/cgroup,task/affinity, cgroup/v1 with
#                                   cores and memory constrained), as on a
#                                   production node. Slurm names them
#                                   /slurm_<node>/uid_<uid>/job_<id> on every
#                                   cluster of the host, so job ids start at
#                                   LACHESIS_PORT_BASE/16*100 (FirstJobId):
#                                   clusters running at once (the tests' port
#                                   bases are 16 apart; 100 ids each) never
#                                   share one.
#                                   Nodes of one host each see all its CPUs,
#                                   so their jobs' cpusets may overlap
#   LACHESIS_ACCOUNTING    none     slurmdbd: also run a private MariaDB
#                                   (all in db/, TCP on 127.0.0.1:base+101)
#                                   and slurmdbd (port base+100, config
#                                   etc/slurmdbd.conf, log log/slurmdbd.log),
#                                   so sacct works and gres/gpu is an
#                                   accounted TRES. `up` then runs
#                                   install-deps.sh slurmdbd; `down`,
#                                   `status` and `logs` find an accounting
#                                   cluster without the variable.
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
# shellcheck source=releases.sh
. "$script_dir/releases.sh"

dir=${LACHESIS_CLUSTER_DIR:-/tmp/lachesis-cluster}
# Absolute paths only: slurm.conf, munged and the pid checks below need them,
# and the script may be run from any cwd.
[[ $dir == /* ]] || dir="$PWD/$dir"
dir=${dir%/}

nodes=${LACHESIS_NODES:-4}
gpus=${LACHESIS_GPUS_PER_NODE:-4}
gpu_types=${LACHESIS_GPU_TYPES:-}
shards=${LACHESIS_SHARDS_PER_GPU:-0}
mps=${LACHESIS_MPS_PER_NODE:-0}
ll_shared_gres=${LACHESIS_LL_SHARED_GRES:-0}
gres_cores=${LACHESIS_GRES_CORES:-0}
topology_conf=${LACHESIS_TOPOLOGY_CONF:-}
cpus=${LACHESIS_CPUS_PER_NODE:-8}
mem=${LACHESIS_MEM_PER_NODE:-16000}
port_base=${LACHESIS_PORT_BASE:-16817}
plugin_dir_extra=${LACHESIS_PLUGIN_DIR:-}
priority_type=${LACHESIS_PRIORITY_TYPE:-priority/basic}
preempt_type=${LACHESIS_PREEMPT_TYPE:-preempt/none}
job_submit=${LACHESIS_JOB_SUBMIT:-}
extra_conf=${LACHESIS_EXTRA_CONF:-}
config_src=${LACHESIS_CONFIG_SRC:-}
debug_level=${LACHESIS_SLURM_DEBUG:-verbose}
keep_state=${LACHESIS_KEEP_STATE:-0}
log_lines=${LACHESIS_LOG_LINES:-40}
accounting=${LACHESIS_ACCOUNTING:-none}
cgroups=${LACHESIS_CGROUPS:-0}

# What the configuration must say differently on each supported Slurm
# release, decided here once from the installed release
# (scripts/releases.sh); docs/slurm-releases.md lists why.
slurm=
cgroup_conf_extra=
release_settings() {
  slurm=$(slurm_release)
  select_params_extra=
  case $slurm in
    22.05)
      # Removed in 23.11: slurmd logs an error for it on every step.
      cgroup_conf_extra=CgroupAutomount=no
      [[ $ll_shared_gres == 0 ]] || die "LACHESIS_LL_SHARED_GRES needs Slurm 23.11 or later (this is $slurm)"
      ;;
    24.11)
      # 23.11+: a job's shards may come from several GPUs of a node (a
      # multi-GPU opportunistic job on shares beside guaranteed jobs,
      # docs/slurm-releases.md). Slurm still takes one GPU with room first.
      select_params_extra=,MULTIPLE_SHARING_GRES_PJ
      [[ $ll_shared_gres == 0 ]] || select_params_extra+=,LL_SHARED_GRES
      ;;
    *) die "Slurm $slurm is not a release this script configures (22.05, 24.11): see docs/slurm-releases.md" ;;
  esac
}

etc="$dir/etc"
conf="$etc/slurm.conf"
state="$dir/state"
# Each slurmd's spool is <dir>/<node> (node_spool): slurmstepd's sockets,
# <dir>/<node>/<node>_<job>.<step> with a 10-digit step id for the batch
# step, must fit in 107 bytes under a test directory named after its test,
# in a LACHESIS_TEST_DIR such as /tmp/lachesis-test-<name>.
logdir="$dir/log"
run="$dir/run"
devdir="$dir/dev"
mungedir="$dir/munge"
munge_socket="$mungedir/munge.socket"
munge_pid="$mungedir/munged.pid"
# The same in slurm.conf and slurmdbd.conf. cred_expire=5 (the minimum) keeps
# the begin-time delay Slurm adds to a requeued job (cred_expire+1 s) at
# about 6 s.
auth_info="socket=$munge_socket,cred_expire=5"
ctld_pid="$run/slurmctld.pid"
# Accounting mode only. The MariaDB server keeps everything, its log too, in
# db/, so a fresh `up` wipes the whole database with one rm.
dbdir="$dir/db"
db_data="$dbdir/data"
db_socket="$dbdir/mariadbd.sock"
db_pid="$dbdir/mariadbd.pid"
db_log="$dbdir/mariadbd.log"
dbd_conf="$etc/slurmdbd.conf"
dbd_pid="$run/slurmdbd.pid"
# slurmdbd has no -f option: it reads slurmdbd.conf from the directory of
# $SLURM_CONF (get_extra_conf_path() in src/common/read_config.c), so its
# environment, not its command line, says which cluster a slurmdbd serves.
dbd_needle="env:SLURM_CONF=$conf"
# Ports, set by validate(): slurmdbd on base+100, MariaDB on base+101.
dbd_port=
db_port=

# Every Slurm client call in here talks to this cluster only.
export SLURM_CONF="$conf"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

node_name() { printf 'lnode%d' "$1"; }
node_spool() { printf '%s/%s' "$dir" "$(node_name "$1")"; }

# GPU type of node K under LACHESIS_GPU_TYPES ("" when untyped).
node_gpu_type() {
  local k=$1 group first=1 count
  for group in ${gpu_types//,/ }; do
    count=${group#*:}
    if ((k >= first && k < first + count)); then
      echo "${group%%:*}"
      return
    fi
    first=$((first + count))
  done
}

# "lnode[1-4]" (or "lnode1" for one node: a one-element range is legal but
# reads oddly in sinfo/scontrol output).
node_list() {
  if ((nodes == 1)); then echo lnode1; else echo "lnode[1-$nodes]"; fi
}

validate() {
  local v
  for v in nodes gpus shards mps cpus mem port_base; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
  done
  ((nodes >= 1)) || die "LACHESIS_NODES must be >= 1"
  if [[ -n $gpu_types ]]; then
    local group sum=0
    for group in ${gpu_types//,/ }; do
      [[ $group =~ ^[a-z][a-z0-9]*:[0-9]+$ ]] || die "LACHESIS_GPU_TYPES: '$group' is not TYPE:NODES (e.g. a:2)"
      sum=$((sum + ${group#*:}))
    done
    ((sum == nodes)) || die "LACHESIS_GPU_TYPES gives $sum nodes, LACHESIS_NODES is $nodes"
    ((gpus > 0)) || die "LACHESIS_GPU_TYPES needs LACHESIS_GPUS_PER_NODE > 0"
  fi
  ((shards == 0 || gpus > 0)) || die "LACHESIS_SHARDS_PER_GPU needs LACHESIS_GPUS_PER_NODE > 0"
  ((mps == 0 || gpus > 0)) || die "LACHESIS_MPS_PER_NODE needs LACHESIS_GPUS_PER_NODE > 0"
  ((mps == 0 || shards == 0)) || die "LACHESIS_MPS_PER_NODE and LACHESIS_SHARDS_PER_GPU do not go together"
  [[ $ll_shared_gres == 0 || $ll_shared_gres == 1 ]] || die "LACHESIS_LL_SHARED_GRES must be 0 or 1, got '$ll_shared_gres'"
  ((cpus >= 1)) || die "LACHESIS_CPUS_PER_NODE must be >= 1"
  ((mem >= 1)) || die "LACHESIS_MEM_PER_NODE must be >= 1"
  ((port_base + nodes <= 65535)) || die "ports beyond 65535"
  # The system Slurm uses 6817/6818; sharing them would make either one talk
  # to the wrong daemons.
  if ((port_base <= 6818 && port_base + nodes >= 6817)); then
    die "ports $port_base..$((port_base + nodes)) clash with a system Slurm (6817/6818)"
  fi
  # sockaddr_un.sun_path is 108 bytes including the NUL.
  ((${#munge_socket} < 108)) || die "munge socket path too long: $munge_socket"
  if [[ -n $plugin_dir_extra && ! -d $plugin_dir_extra ]]; then
    die "LACHESIS_PLUGIN_DIR=$plugin_dir_extra is not a directory"
  fi
  if [[ -n $extra_conf && ! -r $extra_conf ]]; then
    die "LACHESIS_EXTRA_CONF=$extra_conf is not readable"
  fi
  if [[ -n $topology_conf && ! -r $topology_conf ]]; then
    die "LACHESIS_TOPOLOGY_CONF=$topology_conf is not readable"
  fi
  if [[ -n $config_src && ! -r $config_src ]]; then
    die "LACHESIS_CONFIG_SRC=$config_src is not readable"
  fi
  case $accounting in
    none) ;;
    slurmdbd)
      dbd_port=$((port_base + 100))
      db_port=$((port_base + 101))
      # Node K listens on base+K.
      ((nodes < 100)) || die "LACHESIS_ACCOUNTING=slurmdbd needs LACHESIS_NODES < 100 (slurmdbd uses port base+100)"
      ((db_port <= 65535)) || die "slurmdbd/MariaDB ports $dbd_port/$db_port beyond 65535"
      # A system slurmdbd listens on 6819 and a system MariaDB on 3306.
      if ((dbd_port <= 6819 && db_port >= 6817)) || ((dbd_port == 3306 || db_port == 3306)); then
        die "slurmdbd/MariaDB ports $dbd_port/$db_port clash with a system Slurm or MariaDB"
      fi
      ((${#db_socket} < 108)) || die "MariaDB socket path too long: $db_socket"
      ;;
    *) die "LACHESIS_ACCOUNTING must be none or slurmdbd, got '$accounting'" ;;
  esac
}

# True when this cluster runs (or ran) with accounting: asked for now, or a
# database left by an earlier `up`, which `down`, `status` and `logs` must
# still see when LACHESIS_ACCOUNTING is not set for them.
accounting_on() { [[ $accounting == slurmdbd || -d $dbdir ]]; }

# Debian's plugin directory, found from the package rather than hard-coded so
# another architecture or a moved multiarch path still works.
slurm_plugin_dir() {
  local f
  f=$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep -m1 '/priority_basic\.so$' || true)
  if [[ -z $f ]]; then
    f=$(find /usr/lib /usr/lib64 /usr/local/lib -name priority_basic.so -print -quit 2>/dev/null || true)
  fi
  [[ -n $f ]] || die "cannot find Slurm's plugin directory (priority_basic.so)"
  dirname -- "$f"
}

# ---------------------------------------------------------------- processes

# Prints PID if PIDFILE names a live (non-zombie) process whose command is
# COMM and whose command line contains NEEDLE (our config path or munge
# socket). The command-line check is what keeps us from ever signalling a
# recycled pid or a daemon of another cluster.
live_pid() {
  local pidfile=$1 comm=$2 needle=$3 pid
  [[ -r $pidfile ]] || return 1
  pid=$(tr -dc '0-9' <"$pidfile" 2>/dev/null || true)
  [[ -n $pid ]] || return 1
  pid_matches "$pid" "$comm" "$needle" || return 1
  echo "$pid"
}

pid_matches() {
  local pid=$1 comm=$2 needle=$3 c cmd
  # Builtins only: find_strays runs this for every process on the machine.
  { read -r c <"/proc/$pid/comm"; } 2>/dev/null || return 1
  # Debian's binaries are slurmctld-wlm and slurmd-wlm behind the
  # alternatives' links; from 24.05 `scontrol reconfigure` re-executes them
  # (/proc/self/exe), so the daemon that replaced the one we started goes by
  # that name.
  [[ $c == "$comm" || $c == "$comm-wlm" ]] || return 1
  gone "$pid" && return 1
  # A daemon of another root (scripts/release-root.sh: the other Slurm
  # release's tests run there at the same paths, /tmp/lachesis-test/TestX)
  # is never ours, nor ours theirs: same root directory only.
  [[ /proc/$pid/root -ef / ]] || return 1
  # "env:VAR=VALUE": the process's initial environment has that entry
  # (slurmdbd, see dbd_needle). Read whole rather than piped to grep -q,
  # which under pipefail could fail on tr's SIGPIPE.
  if [[ $needle == env:* ]]; then
    cmd=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || return 1
    [[ $'\n'$cmd$'\n' == *$'\n'"${needle#env:}"$'\n'* ]]
    return
  fi
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ " $cmd " == *" $needle "* || " $cmd " == *"=$needle "* ]]
}

# Daemons whose pid file went missing are still ours if their command line
# names our config (slurmctld/slurmd) or socket (munged).
find_strays() {
  local comm=$1 needle=$2 p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    pid_matches "$p" "$comm" "$needle" && echo "$p"
  done
  return 0
}

# True when PID has exited: no such process, or a zombie (field 3 of
# /proc/PID/stat, after the parenthesised command name, is the state).
gone() {
  local line
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 0
  line=${line##*) }
  [[ ${line%% *} == Z ]]
}

# SIGTERM to all PIDS at once, up to 10 s grace, then SIGKILL.
stop_pids() {
  local what=$1 pid i left
  shift
  (($#)) || return 0
  log "stopping $what (pid $*)"
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    left=0
    for pid; do gone "$pid" || left=1; done
    ((left)) || break
    sleep 0.1
  done
  for pid; do
    if ! gone "$pid"; then
      log "$what pid $pid ignored SIGTERM for 10 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for ((i = 0; i < 50; i++)); do
    left=0
    for pid; do gone "$pid" || left=1; done
    ((left)) || break
    sleep 0.1
  done
}

# Stops every COMM daemon whose command line contains NEEDLE: those named by
# the PIDFILES and any stray whose pid file is gone, then removes the files.
stop_daemon() {
  local comm=$1 needle=$2 what=$3 f
  shift 3
  local -a pids=()
  mapfile -t pids < <(
    for f; do live_pid "$f" "$comm" "$needle" || true; done
    find_strays "$comm" "$needle"
  )
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | grep . | sort -un)
  stop_pids "$what" "${pids[@]}"
  rm -f "$@"
}

# The daemons are orphans, so when they exit (or a test kills one with -9)
# they stay zombies until PID 1 reaps them, which on these containers takes
# up to ~2 s, and `pgrep -x slurmctld` lists zombies too. Wait for that so
# that a `pgrep` right after `down` comes back empty. Only waits (at most
# 10 s): zombies hold no port or file and cannot be signalled anyway.
wait_zombies() {
  local i re='slurmctld|slurmd|slurmscriptd|slurmstepd|munged'
  accounting_on && re+='|slurmdbd|mariadbd'
  for ((i = 0; i < 100; i++)); do
    ps -eo stat=,comm= | awk -v re="^($re)(-wlm)?\$" '$1 ~ /^Z/ && $2 ~ re {f=1} END {exit !f}' || return 0
    sleep 0.1
  done
}

ctld_alive() { live_pid "$ctld_pid" slurmctld "$conf" >/dev/null; }
munge_alive() { live_pid "$munge_pid" munged "$munge_socket" >/dev/null; }
slurmd_alive() { live_pid "$run/slurmd-$(node_name "$1").pid" slurmd "$conf" >/dev/null; }
db_alive() { live_pid "$db_pid" mariadbd "$db_data" >/dev/null; }
dbd_alive() { live_pid "$dbd_pid" slurmdbd "$dbd_needle" >/dev/null; }

ctld_answers() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

# Jobs still running when slurmd stops would leave their slurmstepd and
# tasks behind (they are not slurmd's children), so cancel them first and
# give the steps a moment to finish.
cancel_jobs() {
  [[ -r $conf ]] && ctld_alive && ctld_answers || return 0
  local ids i
  ids=$(squeue -h -o '%i' 2>/dev/null || true)
  [[ -n $ids ]] || return 0
  log "cancelling jobs: $(echo "$ids" | tr '\n' ' ')"
  # shellcheck disable=SC2086 # one word per job id
  scancel $ids 2>/dev/null || true
  for ((i = 0; i < 30; i++)); do
    [[ -z $(squeue -h -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING -o '%i' 2>/dev/null) ]] && return 0
    sleep 0.5
  done
  log "warning: jobs still running or completing after 15 s"
}

cluster_down() {
  cancel_jobs
  # All slurmd pid files, also those of nodes beyond the current
  # LACHESIS_NODES (an earlier `up` with more nodes).
  local -a slurmd_pids=("$run"/slurmd-*.pid)
  [[ -e ${slurmd_pids[0]} ]] || slurmd_pids=()
  stop_daemon slurmd "$conf" slurmds "${slurmd_pids[@]}"
  # A step whose processes would not die outlives slurmd ("STEPD
  # TERMINATED ... DUE TO JOB NOT ENDING WITH SIGNALS" and then waiting on
  # a slurmd that is gone); it has no pid file, but slurmd's environment,
  # SLURM_CONF included.
  stop_daemon slurmstepd "env:SLURM_CONF=$conf" slurmstepds
  stop_daemon slurmctld "$conf" slurmctld "$ctld_pid"
  # After slurmctld, which sends its last records (node and cluster events)
  # to slurmdbd on shutdown; MariaDB after slurmdbd for the same reason.
  if accounting_on; then
    stop_daemon slurmdbd "$dbd_needle" slurmdbd "$dbd_pid"
    stop_daemon mariadbd "$db_data" mariadbd "$db_pid"
  fi
  stop_daemon munged "$munge_socket" munged "$munge_pid"
  wait_zombies
}

# ------------------------------------------------------------------ configs

# Drops generated "Key=..." lines whose key the extra file sets, so the extra
# file really overrides them (Slurm would take the later one but log "specified
# more than once" as an error). Repeated keys (NodeName, PartitionName, ...)
# are never dropped.
filter_overridden() {
  local extra=$1
  awk -v extra="$extra" '
    function key(line) {
      sub(/^[ \t]+/, "", line)
      if (line !~ /^[A-Za-z]+=/) return ""
      k = tolower(substr(line, 1, index(line, "=") - 1))
      if (k ~ /^(nodename|partitionname|nodeset|downnodes|frontendname|include|slurmctldhost)$/) return ""
      return k
    }
    BEGIN {
      if (extra != "")
        while ((getline l < extra) > 0) { k = key(l); if (k != "") over[k] = 1 }
    }
    { k = key($0); if (k == "" || !(k in over)) print }
  '
}

write_slurm_conf() {
  local pdir k port tmp gres_types=gpu share_gres=
  if ((shards > 0)); then
    gres_types=gpu,shard
    share_gres=",shard:$((gpus * shards))"
  fi
  if ((mps > 0)); then
    gres_types=gpu,mps
    share_gres=",mps:$mps"
  fi
  pdir=$(slurm_plugin_dir)
  [[ -n $plugin_dir_extra ]] && pdir="$plugin_dir_extra:$pdir"
  tmp="$conf.tmp"
  {
    cat <<EOF
# Generated by scripts/cluster.sh -- edits are lost on the next \`up\`.
ClusterName=lachesis
SlurmctldHost=localhost
SlurmctldPort=$port_base
SlurmUser=root
SlurmdUser=root
PluginDir=$pdir
# Our own munged; cred_expire=5 (the minimum) keeps the begin-time delay Slurm
# adds to a requeued job (cred_expire+1 s) at about 6 s.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=$auth_info
StateSaveLocation=$state
SlurmdSpoolDir=$dir/%n
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$run/slurmd-%n.pid
SlurmctldLogFile=$logdir/slurmctld.log
SlurmdLogFile=$logdir/slurmd-%n.log
SlurmctldDebug=$debug_level
SlurmdDebug=$debug_level
# The declared CPUs/memory/GPUs are fiction on this host.
SlurmdParameters=config_overrides
MailProg=/bin/true
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory${select_params_extra}
# Without a default, CR_*_Memory gives a job without --mem a whole node's
# memory, and jobs could never share a node.
DefMemPerCPU=$((mem / cpus))
GresTypes=$gres_types
PriorityType=$priority_type
PreemptType=$preempt_type
EOF
    if [[ $preempt_type != preempt/none ]]; then
      echo "PreemptMode=REQUEUE"
      echo "JobRequeue=1"
    fi
    [[ -n $job_submit ]] && echo "JobSubmitPlugins=$job_submit"
    if [[ $accounting == slurmdbd ]]; then
      cat <<EOF
# Our own slurmdbd (LACHESIS_ACCOUNTING=slurmdbd). gres/gpu as a TRES puts
# GPUs in AllocTRES (sacct, scontrol show job) and gives
# assoc_mgr_find_tres_pos() a real index. AccountingStorageEnforce is left
# unset: jobs run whether or not their user has an association.
# AccountingStoragePass is the munge socket for connections to slurmdbd
# (_global_auth_key() in slurm_protocol_api.c); AuthInfo is not used for
# them, so without it slurmctld and sacctmgr would try the system munged.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStoragePass=$auth_info
AccountingStorageTRES=gres/gpu$( ((shards > 0)) && echo ,gres/shard)$( ((mps > 0)) && echo ,gres/mps)
JobAcctGatherType=jobacct_gather/linux
EOF
    else
      cat <<EOF
AccountingStorageType=accounting_storage/none
# No AccountingStorageTRES=gres/gpu: without slurmdbd, slurmctld 22.05 dies
# with "fatal: slurmdbd is required to run with TRES gres/gpu"
# (controller.c:1729), so assoc_mgr_find_tres_pos() for gres/gpu is -1 here.
JobAcctGatherType=jobacct_gather/none
EOF
    fi
    if [[ $cgroups == 1 ]]; then
      cat <<EOF
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
FirstJobId=$((port_base / 16 * 100))
EOF
    else
      cat <<EOF
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
EOF
    fi
    cat <<EOF
JobCompType=jobcomp/filetxt
JobCompLoc=$logdir/jobcomp.log
MinJobAge=300
KillWait=5
InactiveLimit=0
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
EOF
    for ((k = 1; k <= nodes; k++)); do
      port=$((port_base + k))
      printf 'NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d ' "$(node_name "$k")" "$port"
      printf 'CPUs=%d Boards=1 SocketsPerBoard=1 CoresPerSocket=%d ThreadsPerCore=1 RealMemory=%d' "$cpus" "$cpus" "$mem"
      local typ
      typ=$(node_gpu_type "$k")
      if [[ -n $typ ]]; then
        printf ' Gres=gpu:%s:%d%s Feature=gpu_%s' "$typ" "$gpus" "$share_gres" "$typ"
      elif ((gpus > 0)); then
        printf ' Gres=gpu:%d%s' "$gpus" "$share_gres"
      fi
      printf ' State=UNKNOWN\n'
    done
    echo "PartitionName=gpu Nodes=$(node_list) Default=YES MaxTime=INFINITE State=UP"
    if [[ -n $topology_conf ]]; then echo "TopologyPlugin=topology/tree"; fi
  } | filter_overridden "$extra_conf" >"$tmp"
  if [[ -n $extra_conf ]]; then
    {
      echo "# --- from LACHESIS_EXTRA_CONF=$extra_conf"
      cat -- "$extra_conf"
      echo
    } >>"$tmp"
  fi
  mv -f "$tmp" "$conf"
}

# topology.conf next to slurm.conf, where slurmctld reads it, from
# LACHESIS_TOPOLOGY_CONF; none without it.
write_topology_conf() {
  rm -f -- "$etc/topology.conf"
  [[ -z $topology_conf ]] || cp -- "$topology_conf" "$etc/topology.conf"
}

write_gres_conf() {
  local files cores=
  if ((gpus == 1)); then files="$devdir/nvidia0"; else files="$devdir/nvidia[0-$((gpus - 1))]"; fi
  # Cores= ties the GPUs to the node's cores: slurmctld then writes the
  # node's Gres with a socket suffix ("gpu:4(S:0)"), as on a site whose
  # gres.conf names them.
  if ((gres_cores)); then cores=" Cores=0-$((cpus - 1))"; fi
  {
    echo "# Generated by scripts/cluster.sh. No real GPUs: no NVML detection."
    echo "AutoDetect=off"
    # Slurm drops file-less GPUs ("Removing file-less GPU"), hence the fake
    # device files.
    if [[ -n $gpu_types ]]; then
      local group first=1 count
      for group in ${gpu_types//,/ }; do
        count=${group#*:}
        if ((count == 1)); then
          echo "NodeName=lnode$first Name=gpu Type=${group%%:*} File=$files$cores"
        elif ((count > 1)); then
          echo "NodeName=lnode[$first-$((first + count - 1))] Name=gpu Type=${group%%:*} File=$files$cores"
        fi
        first=$((first + count))
      done
    elif ((gpus > 0)); then
      echo "NodeName=$(node_list) Name=gpu File=$files$cores"
    fi
    # Shards: Name and Count only, so Slurm spreads them evenly over each
    # node's GPUs (gres.shtml, Sharding, case 2).
    if ((shards > 0)); then
      echo "NodeName=$(node_list) Name=shard Count=$((gpus * shards))"
    fi
    # MPS: File= puts the whole count on the first GPU (gres.shtml, MPS
    # Management, case 3); the node's other GPUs get none.
    if ((mps > 0)); then
      echo "NodeName=$(node_list) Name=mps Count=$mps File=$devdir/nvidia0"
    fi
    true
  } >"$etc/gres.conf"
}

make_devices() {
  local g
  rm -rf "$devdir"
  mkdir -p "$devdir"
  # Character devices (1,3 is /dev/null's number): Slurm wants device files
  # it can stat as char devices, and writing to them is harmless.
  for ((g = 0; g < gpus; g++)); do
    mknod -m 0666 "$devdir/nvidia$g" c 1 3
  done
}

prepare_dirs() {
  local k
  mkdir -p "$dir" "$etc" "$logdir" "$run"
  # A fresh cluster every `up` (unless asked otherwise): old jobs and node
  # states would otherwise come back from the state files.
  if [[ $keep_state != 1 ]]; then
    rm -rf "$state"
    for ((k = 1; k <= nodes; k++)); do rm -rf "$(node_spool "$k")"; done
    # Keep the previous run's logs one generation back for post-mortems.
    rm -rf "$logdir/previous"
    mkdir -p "$logdir/previous"
    find "$logdir" -maxdepth 1 -type f -exec mv -t "$logdir/previous" {} +
    # The accounting database goes with the jobs: job ids start at 1 again,
    # and sacct would mix old and new jobs of the same id.
    if [[ -d $dbdir ]]; then
      [[ -f $db_log ]] && mv -f "$db_log" "$logdir/previous/"
      rm -rf "$dbdir"
    fi
    rm -f "$dbd_conf"
  fi
  mkdir -p "$state"
  for ((k = 1; k <= nodes; k++)); do mkdir -p "$(node_spool "$k")"; done
  rm -f "$etc/lachesis.yaml"
  if [[ -n $config_src ]]; then
    cp -- "$config_src" "$etc/lachesis.yaml"
  fi
}

# ------------------------------------------------------------------- munged

start_munge() {
  # munged refuses to run as root and insists that its key, socket and log
  # directories belong to it and are not writable by others.
  mkdir -p "$mungedir"
  chown munge:munge "$mungedir"
  chmod 0755 "$mungedir"
  runuser -u munge -- test -w "$mungedir" ||
    die "user munge cannot reach $mungedir (a parent directory is not searchable by it); pick another LACHESIS_CLUSTER_DIR"
  if [[ ! -s $mungedir/munge.key ]]; then
    runuser -u munge -- mungekey --create --keyfile="$mungedir/munge.key" 2>/dev/null ||
      runuser -u munge -- dd if=/dev/urandom of="$mungedir/munge.key" bs=1024 count=1 status=none
  fi
  chown munge:munge "$mungedir/munge.key"
  chmod 0600 "$mungedir/munge.key"
  rm -f "$munge_socket" "$munge_socket.lock" "$munge_pid"
  runuser -u munge -- munged \
    --socket="$munge_socket" \
    --key-file="$mungedir/munge.key" \
    --pid-file="$munge_pid" \
    --log-file="$mungedir/munged.log" \
    --seed-file="$mungedir/munged.seed" ||
    { tail -n "$log_lines" "$mungedir/munged.log" >&2 2>/dev/null; die "munged failed to start"; }
  local i
  for ((i = 0; i < 50; i++)); do
    if munge -n -S "$munge_socket" 2>/dev/null | unmunge -S "$munge_socket" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  tail -n "$log_lines" "$mungedir/munged.log" >&2 2>/dev/null || true
  die "munged does not answer on $munge_socket"
}

# --------------------------------------------------------------- accounting

# Server options for mariadb-install-db and mariadbd alike.
#  --no-defaults (must come first): /etc/mysql/my.cnf would point the server
#    at the system datadir and socket.
#  --user=root: the mysql user comes only with mariadb-server's postinst,
#    which install-deps.sh does not install; every daemon here runs as root.
#  --innodb-use-native-aio=0: these containers (gVisor) may refuse io_uring
#    and libaio; simulated AIO is plenty for a test database.
#  buffer pool, log file and lock wait: at least half of what slurmdbd
#    recommends, or it logs "Database settings not recommended values" as an
#    error. The pool is only touched as used (~100 MB resident).
#  --innodb-flush-method=nosync, no doublewrite: InnoDB never fsyncs. fsync
#    is slow here: mariadb-install-db takes ~4 s with it and ~0.7 s without,
#    and slurmdbd's table creation speeds up too. Commits still reach the
#    OS, so a killed mariadbd loses nothing; only a host crash could, and
#    the database is thrown away on the next `up` anyway.
db_opts=(--no-defaults --user=root --datadir="$db_data"
  --skip-name-resolve --innodb-use-native-aio=0
  --innodb-buffer-pool-size=512M --innodb-log-file-size=64M
  --innodb-lock-wait-timeout=900 --innodb-flush-method=nosync
  --innodb-doublewrite=0)

db_client() { mariadb --no-defaults --socket="$db_socket" -u root "$@"; }

# A private MariaDB: everything in db/, TCP on 127.0.0.1 only. slurmdbd's
# mysql plugin always passes a NULL socket to mysql_real_connect(), so
# StorageHost=localhost would mean the system socket; a 127.0.0.1 port in
# slurmdbd.conf says where this cluster's server is.
start_mariadb() {
  mkdir -p "$dbdir"
  if [[ ! -d $db_data/mysql ]]; then
    rm -rf "$db_data"
    # Root logs in through the socket (unix_socket auth), so no password.
    if ! mariadb-install-db "${db_opts[@]}" --auth-root-authentication-method=socket \
      --skip-test-db >"$dbdir/install-db.log" 2>&1; then
      tail -n "$log_lines" "$dbdir/install-db.log" >&2
      log "error: mariadb-install-db failed (see $dbdir/install-db.log)"
      return 1
    fi
  fi
  rm -f "$db_socket" "$db_pid"
  # mariadbd does not daemonize: setsid detaches it from our session (a ^C
  # of the caller must not stop it) and the redirections keep a caller's
  # $(cluster.sh up) from waiting on its stdout forever. Without job control
  # the background child is no process group leader, so setsid execs in
  # place and $! is mariadbd itself.
  setsid mariadbd "${db_opts[@]}" --socket="$db_socket" --pid-file="$db_pid" \
    --log-error="$db_log" --bind-address=127.0.0.1 --port="$db_port" \
    </dev/null >>"$db_log" 2>&1 &
  local pid=$! i
  for ((i = 0; i < 300; i++)); do
    db_client -e 'SELECT 1' >/dev/null 2>&1 && return 0
    gone "$pid" && break
    sleep 0.1
  done
  log "error: mariadbd died or did not answer on $db_socket within 30 s"
  return 1
}

# A fresh random password for slurmdbd's database user on every `up`, fed
# through stdin so it never shows in ps; it lives only in slurmdbd.conf
# (mode 600).
write_dbd_conf() {
  local pw tmp="$dbd_conf.tmp"
  pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  db_client <<EOF || return 1
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE OR REPLACE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
  # slurmdbd insists on mode 600 and on the file belonging to its SlurmUser.
  rm -f "$tmp"
  (
    umask 077
    cat >"$tmp" <<EOF
# Generated by scripts/cluster.sh -- edits are lost on the next \`up\`.
AuthType=auth/munge
AuthInfo=$auth_info
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
DebugLevel=$debug_level
LogFile=$logdir/slurmdbd.log
PidFile=$dbd_pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pw
StorageLoc=slurm_acct_db
EOF
  )
  chown root:root "$tmp"
  mv -f "$tmp" "$dbd_conf"
}

dbd_answers() { sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; }

# slurmdbd daemonizes and finds slurmdbd.conf through $SLURM_CONF (exported
# above). Its pid file comes right after daemonizing, before it connects to
# MariaDB and creates its tables, which takes a few seconds the first time.
start_slurmdbd() {
  rm -f "$dbd_pid"
  slurmdbd || return 1
  # A deadline, not a count: one sacctmgr that cannot connect takes seconds.
  local start=$SECONDS
  while ((SECONDS - start < 60)); do
    if dbd_alive; then
      dbd_answers && return 0
    elif ((SECONDS - start >= 5)); then
      break
    fi
    sleep 0.2
  done
  return 1
}

# `sacctmgr add cluster` also creates the cluster's root account and the
# root user's association in it, which is all jobs of root need; other users
# run without an association (AccountingStorageEnforce is unset).
register_cluster() {
  [[ -n $(sacctmgr -n -P list cluster lachesis format=cluster 2>/dev/null) ]] && return 0
  sacctmgr -i add cluster lachesis >/dev/null || return 1
}

start_accounting() {
  start_mariadb || fail_up "MariaDB did not start"
  write_dbd_conf || fail_up "cannot create slurmdbd's database user"
  start_slurmdbd || fail_up "slurmdbd died or did not answer sacctmgr within 60 s"
  register_cluster || fail_up "sacctmgr add cluster lachesis failed"
}

# ------------------------------------------------------------------- slurm

# slurmctld daemonizes; its pid file appears once the daemon has taken it.
start_ctld() {
  rm -f "$ctld_pid"
  slurmctld -f "$conf" || die "slurmctld -f $conf failed (see $logdir/slurmctld.log)"
}

wait_ctld() {
  local timeout=$1 i
  for ((i = 0; i < timeout * 2; i++)); do
    if ctld_alive; then
      ctld_answers && return 0
    elif ((i >= 10)); then
      # The pid file comes right after daemonizing; no live daemon after 5 s
      # means it died (a fatal in its log), so do not wait out the timeout.
      return 1
    fi
    sleep 0.5
  done
  return 1
}

start_slurmd() {
  local n
  n=$(node_name "$1")
  rm -f "$run/slurmd-$n.pid"
  slurmd -f "$conf" -N "$n" || die "slurmd -N $n failed (see $logdir/slurmd-$n.log)"
}

# A failure report shows each log's last error lines first: the tail alone
# often starts after the error that mattered (a batch launch that failed
# a minute before the test gave up). Their "! " prefix keeps them in
# `make test`'s filtered output, which drops lines that begin with a
# timestamp. Lines every run has (no PMIx library here, a first start's
# missing state files, a job's own cancel notice) are left out.
log_error_noise='pmix|PMIx|NOTE: Trying backup state save file|state file .*: No such file|(JOB|STEP) [0-9.]+ ON [^ ]+ CANCELLED AT'
show_logs() {
  local f errs
  for f in "$logdir"/*.log "$db_log" "$mungedir/munged.log"; do
    [[ -f $f ]] || continue
    errs=$({ grep -E '(error|fatal):' -- "$f" || true; } | { grep -vE "$log_error_noise" || true; } | tail -n 15)
    if [[ -n $errs ]]; then
      echo "===== $f (last error lines)"
      sed "s|^|! ${f##*/}: |" <<<"$errs"
    fi
    echo "===== $f (last $log_lines lines)"
    tail -n "$log_lines" -- "$f"
  done
}

fail_up() {
  log "error: $*"
  show_logs >&2
  log "stopping what was started (logs stay in $logdir)"
  cluster_down
  exit 1
}

count_idle() {
  # %t is the compact state: exactly "idle" means registered, responding and
  # free (no "*" not-responding or "~" power-save suffix).
  sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle" {print $1}' | sort -u | wc -l
}

cmd_up() {
  validate
  release_settings
  local -a deps=()
  [[ $accounting == slurmdbd ]] && deps=(slurmdbd)
  "$repo_root/scripts/install-deps.sh" "${deps[@]}"
  # Leftovers of an earlier `up` in this directory would hold the ports and
  # pid files.
  if [[ -r $conf ]]; then cluster_down; fi
  prepare_dirs
  make_devices
  write_slurm_conf
  write_gres_conf
  write_topology_conf
  if [[ $cgroups == 1 ]]; then
    # Slurm reads cgroup.conf next to slurm.conf; the v1 hierarchies are
    # mounted already.
    {
      echo "CgroupPlugin=cgroup/v1"
      [[ -n $cgroup_conf_extra ]] && echo "$cgroup_conf_extra"
      echo "ConstrainCores=yes"
      echo "ConstrainRAMSpace=yes"
    } >"$etc/cgroup.conf"
  fi
  start_munge
  [[ $accounting == slurmdbd ]] && start_accounting
  start_ctld
  wait_ctld 30 || fail_up "slurmctld died or did not answer 'scontrol ping' within 30 s"
  local k
  for ((k = 1; k <= nodes; k++)); do start_slurmd "$k"; done
  local i idle=0
  for ((i = 0; i < 120; i++)); do
    idle=$(count_idle)
    ((idle == nodes)) && break
    sleep 0.5
  done
  ((idle == nodes)) || fail_up "only $idle of $nodes nodes idle after 60 s"
  local acct=
  [[ $accounting == slurmdbd ]] && acct=" accounting=slurmdbd (port $dbd_port, MariaDB 127.0.0.1:$db_port);"
  echo "cluster up: $nodes nodes x ${gpus} GPUs, ${cpus} CPUs, ${mem} MB;" \
    "priority=$priority_type preempt=$preempt_type${job_submit:+ job_submit=$job_submit};$acct" \
    "SLURM_CONF=$conf"
}

cmd_down() {
  if [[ ! -d $dir ]]; then
    echo "cluster down: nothing in $dir"
    return 0
  fi
  cluster_down
  echo "cluster down: logs kept in $logdir"
}

cmd_status() {
  local k pid
  if pid=$(live_pid "$munge_pid" munged "$munge_socket"); then echo "munged     running (pid $pid)"; else echo "munged     stopped"; fi
  if accounting_on; then
    if pid=$(live_pid "$db_pid" mariadbd "$db_data"); then echo "mariadbd   running (pid $pid)"; else echo "mariadbd   stopped"; fi
    if pid=$(live_pid "$dbd_pid" slurmdbd "$dbd_needle"); then echo "slurmdbd   running (pid $pid)"; else echo "slurmdbd   stopped"; fi
  fi
  if pid=$(live_pid "$ctld_pid" slurmctld "$conf"); then echo "slurmctld  running (pid $pid)"; else echo "slurmctld  stopped"; fi
  for ((k = 1; k <= nodes; k++)); do
    if pid=$(live_pid "$run/slurmd-$(node_name "$k").pid" slurmd "$conf"); then
      printf 'slurmd %-7s running (pid %s)\n' "$(node_name "$k")" "$pid"
    else
      printf 'slurmd %-7s stopped\n' "$(node_name "$k")"
    fi
  done
  if ctld_alive; then
    echo
    sinfo -N -o '%N %T %C %m %G' || true
    echo
    squeue -o '%.8i %.9P %.20j %.8T %.10M %.6D %.10Q %b %R' || true
  fi
}

cmd_env() {
  printf 'export SLURM_CONF=%q\n' "$conf"
  printf 'export LACHESIS_CLUSTER_DIR=%q\n' "$dir"
}

cmd_restart_ctld() {
  [[ -r $conf ]] || die "no cluster configured in $dir (run up first)"
  if ctld_alive; then
    log "slurmctld already running"
  else
    munge_alive || start_munge
    # Left running by a test that only stopped slurmctld; started again if
    # something took them down too (slurmdbd.conf and the database are kept).
    if [[ -r $dbd_conf ]]; then
      db_port=$(sed -n 's/^StoragePort=//p' "$dbd_conf")
      db_alive || start_mariadb || fail_up "MariaDB did not start again"
      dbd_alive || start_slurmdbd || fail_up "slurmdbd died or did not answer sacctmgr within 60 s"
    fi
    start_ctld
  fi
  wait_ctld 30 || fail_up "restarted slurmctld died or did not answer 'scontrol ping' within 30 s"
  # Recovered nodes show as "unk" or "*" (not responding) until their slurmd
  # registers again, which takes a few seconds; jobs submitted before that
  # would pend. A node whose slurmd a test stopped never comes back, so this
  # only warns.
  local i bad=
  for ((i = 0; i < 60; i++)); do
    bad=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^unk|[*]$/ {print $1}' | sort -u | tr '\n' ' ')
    [[ -z $bad ]] && break
    sleep 0.5
  done
  [[ -z $bad ]] || log "warning: nodes not registered again after 30 s: $bad"
  echo "slurmctld up (pid $(cat "$ctld_pid"))"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  logs) show_logs ;;
  restart-ctld) cmd_restart_ctld ;;
  *)
    echo "usage: $0 up|down|status|env|logs|restart-ctld" >&2
    exit 2
    ;;
esac
