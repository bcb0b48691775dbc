# A single-node Slurm on localhost for tests/e2e/campaign_slurm.sh: munged, slurmctld and slurmd from
# Debian's munge and slurm-wlm packages (scripts/setup installs them), with a generated slurm.conf, a
# fresh munge key and their state in a temporary folder, on free ports; nothing under /etc is used.
#
#   slurm_start            starts it and waits until the node is idle; exports SLURM_CONF. On failure it
#                          returns 1 with the reason in SLURM_WHY (and the daemons' logs printed).
#   slurm_stop             cancels every job, stops the daemons, removes the folder (the caller's EXIT trap)
#   slurm_wait JOB SECS    waits until squeue no longer lists JOB; returns 1 after SECS
#   slurm_states JOB       "<array task> <state>" per array task of JOB, from scontrol (no accounting
#                          database here: sacct has nothing to read, and slurmctld keeps ended jobs for
#                          MinJobAge seconds)

SLURM_DIR=""
SLURM_PIDS=()
SLURM_WHY=""

slurm_missing() {
  local program missing=()
  for program in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo scancel; do
    command -v "$program" > /dev/null || missing+=("$program")
  done
  echo "${missing[*]}"
}

slurm_start() {
  local missing; missing=$(slurm_missing)
  if [ -n "$missing" ]; then SLURM_WHY="not installed: $missing (Debian: apt-get install slurm-wlm munge; scripts/setup does)"; return 1; fi
  if [ "$(id -u)" != 0 ]; then SLURM_WHY="not root: slurmd must run as root to start jobs"; return 1; fi
  # Short paths: munge's socket is a Unix socket, whose path must fit in 108 bytes.
  SLURM_DIR=$(mktemp -d /tmp/d2k-slurm.XXXXXX)
  chmod 755 "$SLURM_DIR"
  mkdir -p "$SLURM_DIR"/{munge,ctld,spool,log}
  chmod 700 "$SLURM_DIR/munge"
  if ! mungekey --create --keyfile="$SLURM_DIR/munge/munge.key" --force > "$SLURM_DIR/log/mungekey.log" 2>&1; then
    SLURM_WHY="mungekey failed: $(cat "$SLURM_DIR/log/mungekey.log")"; return 1
  fi
  chmod 400 "$SLURM_DIR/munge/munge.key"
  munged --foreground --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$SLURM_DIR/munge/munge.socket" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/log/munged.log" --seed-file="$SLURM_DIR/munge/seed" \
    > "$SLURM_DIR/log/munged.out" 2>&1 &
  SLURM_PIDS+=($!)
  local ports host mem
  ports=$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
  host=$(hostname -s)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  # proctrack/linuxproc and task/none: no cgroups, which containers often lack. cons_tres per core, so that
  # two one-CPU array tasks run side by side. No accounting (no slurmdbd).
  cat > "$SLURM_DIR/slurm.conf" <<CONF
ClusterName=d2k-e2e
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports% *}
SlurmdPort=${ports#* }
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SLURM_DIR/munge/munge.socket
StateSaveLocation=$SLURM_DIR/ctld
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=e2e Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  local i
  for i in $(seq 50); do [ -S "$SLURM_DIR/munge/munge.socket" ] && break; sleep 0.1; done
  slurmctld -D -f "$SLURM_CONF" > "$SLURM_DIR/log/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" > "$SLURM_DIR/log/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  for i in $(seq 150); do
    if sinfo -h -o "%T" 2> /dev/null | grep -qx idle; then return 0; fi
    sleep 0.2
  done
  SLURM_WHY="the node did not become idle within 30 s (sinfo: $(sinfo -h -o '%T %E' 2>&1 | head -3))"
  local log
  for log in "$SLURM_DIR"/log/*; do echo "--- $log"; tail -20 "$log"; done >&2
  return 1
}

slurm_stop() {
  [ -n "$SLURM_DIR" ] || return 0
  if [ ${#SLURM_PIDS[@]} -gt 2 ]; then
    scancel --full --quiet --user "$(id -un)" 2> /dev/null || true
    local i
    for i in $(seq 50); do [ -z "$(squeue -h 2> /dev/null)" ] && break; sleep 0.1; done
  fi
  local pid
  for ((i = ${#SLURM_PIDS[@]} - 1; i >= 0; i--)); do kill "${SLURM_PIDS[$i]}" 2> /dev/null || true; done
  for pid in "${SLURM_PIDS[@]}"; do wait "$pid" 2> /dev/null || true; done
  SLURM_PIDS=()
  rm -rf "$SLURM_DIR"
  SLURM_DIR=""
}

slurm_wait() {
  local job=$1 seconds=$2 start=$SECONDS
  while [ -n "$(squeue -h -j "$job" 2> /dev/null)" ]; do
    [ $((SECONDS - start)) -lt "$seconds" ] || return 1
    sleep 0.5
  done
}

slurm_states() {
  scontrol -o show job "$1" | sed -n 's/.*ArrayTaskId=\([0-9]*\) .*JobState=\([A-Z_]*\) .*/\1 \2/p' | sort -n
}
