#!/usr/bin/env bash
# A real Slurm cluster of one node on this machine (Debian's slurm-wlm and munge, no systemd), for
# the study runner's Slurm executor (docs/STUDIES.md, "On a cluster"); the recipe of
# ../shared/PEERS.md. Everything but munge's key lives in $SLURM_LOCAL_DIR (default
# /tmp/driftlab-slurm); the Slurm commands find the configuration through SLURM_CONF.
#
#   bash scripts/slurm-local.sh start    # install if missing (apt), write the config, start munged,
#                                        # slurmctld, slurmd; wait until the node is idle
#   eval "$(bash scripts/slurm-local.sh env)"   # SLURM_CONF for this shell
#   bash scripts/slurm-local.sh stop     # stop the daemons by their pid files
set -euo pipefail
D=${SLURM_LOCAL_DIR:-/tmp/driftlab-slurm}
export SLURM_CONF=$D/slurm.conf
host=$(hostname -s)

stop() {
  for f in "$D/slurmd.pid" "$D/slurmctld.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 1
}

case "${1:-}" in
  env)
    echo "export SLURM_CONF=$SLURM_CONF"
    ;;
  stop)
    stop
    ;;
  start)
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
      SUDO=""
      [ "$(id -u)" -eq 0 ] || SUDO="sudo"
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends slurm-wlm munge
    fi
    stop
    mkdir -p "$D/state" "$D/spool" /run/munge /etc/munge
    if [ ! -s /etc/munge/munge.key ]; then
      dd if=/dev/urandom bs=1024 count=1 of=/etc/munge/munge.key status=none
    fi
    chown munge:munge /etc/munge/munge.key /run/munge 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
    pgrep -x munged >/dev/null || /usr/sbin/munged --force
    mem=$(free -m | awk '/^Mem:/{print int($2 * 0.9)}')
    cat > "$SLURM_CONF" <<EOF
ClusterName=driftlab
SlurmctldHost=$host
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ReturnToService=2
MpiDefault=none
JobRequeue=1
KillWait=30
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    /usr/sbin/slurmctld
    /usr/sbin/slurmd
    for _ in $(seq 60); do
      if sinfo -h -o %T 2>/dev/null | grep -q idle; then
        echo "slurm: one node ($host, $(nproc) CPUs) idle; SLURM_CONF=$SLURM_CONF"
        exit 0
      fi
      sleep 1
    done
    echo "slurm: the node did not come up idle; logs: $D/slurmctld.log $D/slurmd.log" >&2
    sinfo >&2 || true
    exit 1
    ;;
  *)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
