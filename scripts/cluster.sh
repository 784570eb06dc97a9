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
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)

dir=${LACHESIS_CLUSTER_DIR:-/tmp/lachesis-cluster}
# Absolute paths only: slurm.conf, munged and the pid checks below need them,
# and the script may be run from any cwd.
[[ $dir == /* ]] || dir="$PWD/$dir"
dir=${dir%/}

nodes=${LACHESIS_NODES:-4}
gpus=${LACHESIS_GPUS_PER_NODE:-4}
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

etc="$dir/etc"
conf="$etc/slurm.conf"
state="$dir/state"
spool="$dir/spool"
logdir="$dir/log"
run="$dir/run"
devdir="$dir/dev"
mungedir="$dir/munge"
munge_socket="$mungedir/munge.socket"
munge_pid="$mungedir/munged.pid"
ctld_pid="$run/slurmctld.pid"

# Every Slurm client call in here talks to this cluster only.
export SLURM_CONF="$conf"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

node_name() { printf 'lnode%d' "$1"; }

# "lnode[1-4]" (or "lnode1" for one node: a one-element range is legal but
# reads oddly in sinfo/scontrol output).
node_list() {
  if ((nodes == 1)); then echo lnode1; else echo "lnode[1-$nodes]"; fi
}

validate() {
  local v
  for v in nodes gpus cpus mem port_base; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
  done
  ((nodes >= 1)) || die "LACHESIS_NODES must be >= 1"
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
  if [[ -n $config_src && ! -r $config_src ]]; then
    die "LACHESIS_CONFIG_SRC=$config_src is not readable"
  fi
}

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
  [[ $c == "$comm" ]] || return 1
  gone "$pid" && return 1
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
  local i
  for ((i = 0; i < 100; i++)); do
    ps -eo stat=,comm= | awk '$1 ~ /^Z/ && $2 ~ /^(slurmctld|slurmd|slurmscriptd|slurmstepd|munged)$/ {f=1} END {exit !f}' || return 0
    sleep 0.1
  done
}

ctld_alive() { live_pid "$ctld_pid" slurmctld "$conf" >/dev/null; }
munge_alive() { live_pid "$munge_pid" munged "$munge_socket" >/dev/null; }
slurmd_alive() { live_pid "$run/slurmd-$(node_name "$1").pid" slurmd "$conf" >/dev/null; }

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
  stop_daemon slurmctld "$conf" slurmctld "$ctld_pid"
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
  local pdir k port tmp
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
AuthInfo=socket=$munge_socket,cred_expire=5
StateSaveLocation=$state
SlurmdSpoolDir=$spool/%n
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
SelectTypeParameters=CR_Core_Memory
# Without a default, CR_*_Memory gives a job without --mem a whole node's
# memory, and jobs could never share a node.
DefMemPerCPU=$((mem / cpus))
GresTypes=gpu
PriorityType=$priority_type
PreemptType=$preempt_type
EOF
    if [[ $preempt_type != preempt/none ]]; then
      echo "PreemptMode=REQUEUE"
      echo "JobRequeue=1"
    fi
    [[ -n $job_submit ]] && echo "JobSubmitPlugins=$job_submit"
    cat <<EOF
AccountingStorageType=accounting_storage/none
# No AccountingStorageTRES=gres/gpu: without slurmdbd, slurmctld 22.05 dies
# with "fatal: slurmdbd is required to run with TRES gres/gpu"
# (controller.c:1729), so assoc_mgr_find_tres_pos() for gres/gpu is -1 here.
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$logdir/jobcomp.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
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
      ((gpus > 0)) && printf ' Gres=gpu:%d' "$gpus"
      printf ' State=UNKNOWN\n'
    done
    echo "PartitionName=gpu Nodes=$(node_list) Default=YES MaxTime=INFINITE State=UP"
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

write_gres_conf() {
  local files
  if ((gpus == 1)); then files="$devdir/nvidia0"; else files="$devdir/nvidia[0-$((gpus - 1))]"; fi
  {
    echo "# Generated by scripts/cluster.sh. No real GPUs: no NVML detection."
    echo "AutoDetect=off"
    # Slurm drops file-less GPUs ("Removing file-less GPU"), hence the fake
    # device files.
    ((gpus > 0)) && echo "NodeName=$(node_list) Name=gpu File=$files"
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
  mkdir -p "$dir" "$etc" "$logdir" "$run" "$spool"
  # A fresh cluster every `up` (unless asked otherwise): old jobs and node
  # states would otherwise come back from the state files.
  if [[ $keep_state != 1 ]]; then
    rm -rf "$state" "$spool"
    # Keep the previous run's logs one generation back for post-mortems.
    rm -rf "$logdir/previous"
    mkdir -p "$logdir/previous"
    find "$logdir" -maxdepth 1 -type f -exec mv -t "$logdir/previous" {} +
  fi
  mkdir -p "$state" "$spool"
  local k
  for ((k = 1; k <= nodes; k++)); do mkdir -p "$spool/$(node_name "$k")"; done
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

show_logs() {
  local f
  for f in "$logdir"/*.log "$mungedir/munged.log"; do
    [[ -f $f ]] || continue
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
  "$repo_root/scripts/install-deps.sh"
  # Leftovers of an earlier `up` in this directory would hold the ports and
  # pid files.
  if [[ -r $conf ]]; then cluster_down; fi
  prepare_dirs
  make_devices
  write_slurm_conf
  write_gres_conf
  start_munge
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
  echo "cluster up: $nodes nodes x ${gpus} GPUs, ${cpus} CPUs, ${mem} MB;" \
    "priority=$priority_type preempt=$preempt_type${job_submit:+ job_submit=$job_submit};" \
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
