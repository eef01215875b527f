#!/bin/bash
# Calibrates one vLLM replica placed as scenarios/catalogue/replica-loss-vllm.toml places each
# (CPU 1, a CPU quota of half a CPU), with the recorder on CPU 0 under a one-CPU quota and the
# most CPU weight, as the study runner places them (issue 52: a host's capacity is its own; the
# catalogue's is one host's). Writes OUT/out/calibration.md and calibration.json; the lambda_max
# there is the capacity_rps to run the scenario with, and its probe_ms, ceiling_rps and
# ceiling_offered_rps the [testbed] keys of the same names (SPEC §10 "Capacity check").
#
#   bash studies/replica-loss-vllm/calibrate.sh OUT
#
# Needs root (control groups), vllm-cpu.sh with its setup done (PERCENTES_VLLM_CPU, default
# ../shared/real-targets/vllm-cpu.sh) and percentes (PERCENTES_BIN, default on PATH). cgroup v1 or
# v2. Takes 10-20 minutes: two calibrations of 15 s steps at time factor 10, a third when they
# differ by more than 10 %.
set -euo pipefail
out=${1:?usage: calibrate.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
vllm=${PERCENTES_VLLM_CPU:-$here/../../../shared/real-targets/vllm-cpu.sh}
bin=${PERCENTES_BIN:-percentes}
port=${PERCENTES_CALIBRATION_PORT:-18600}
[ "$(id -u)" = 0 ] || { echo "calibrate.sh: needs root (control groups)" >&2; exit 1; }
[ -f "$vllm" ] || { echo "calibrate.sh: no vllm-cpu.sh at $vllm (set PERCENTES_VLLM_CPU)" >&2; exit 1; }
mkdir -p "$out"
sed -e "s/127.0.0.1:18600/127.0.0.1:$port/g" "$here/run-names/calibration.toml" > "$out/cal.toml"

tag=percentes-calibrate-$$
cg=/sys/fs/cgroup
if [ -f $cg/cgroup.controllers ]; then
  # v2: one tree; the parent hands cpuset and cpu down.
  mkdir -p $cg/$tag/target $cg/$tag/recorder
  echo "+cpuset +cpu" > $cg/cgroup.subtree_control
  echo "+cpuset +cpu" > $cg/$tag/cgroup.subtree_control
  echo 1 > $cg/$tag/target/cpuset.cpus; echo 0 > $cg/$tag/recorder/cpuset.cpus
  echo "50000 100000" > $cg/$tag/target/cpu.max; echo "100000 100000" > $cg/$tag/recorder/cpu.max
  echo 10000 > $cg/$tag/cpu.weight; echo 10000 > $cg/$tag/recorder/cpu.weight
  target_tasks=($cg/$tag/target/cgroup.procs); recorder_tasks=($cg/$tag/recorder/cgroup.procs)
  groups=($cg/$tag/target $cg/$tag/recorder $cg/$tag)
else
  for c in cpuset cpu; do mkdir -p $cg/$c/$tag/target $cg/$c/$tag/recorder; done
  mems=$(cat $cg/cpuset/cpuset.mems)
  cat $cg/cpuset/cpuset.cpus > $cg/cpuset/$tag/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/cpuset.mems
  echo 1 > $cg/cpuset/$tag/target/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/target/cpuset.mems
  echo 0 > $cg/cpuset/$tag/recorder/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/recorder/cpuset.mems
  echo 50000 > $cg/cpu/$tag/target/cpu.cfs_quota_us
  echo 100000 > $cg/cpu/$tag/recorder/cpu.cfs_quota_us
  echo 262144 > $cg/cpu/$tag/cpu.shares; echo 262144 > $cg/cpu/$tag/recorder/cpu.shares
  target_tasks=($cg/cpuset/$tag/target/tasks $cg/cpu/$tag/target/tasks)
  recorder_tasks=($cg/cpuset/$tag/recorder/tasks $cg/cpu/$tag/recorder/tasks)
  groups=($cg/cpuset/$tag/target $cg/cpuset/$tag/recorder $cg/cpuset/$tag
          $cg/cpu/$tag/target $cg/cpu/$tag/recorder $cg/cpu/$tag)
fi
join() { local f; for f in "$@"; do echo "$BASHPID" > "$f"; done; }

replica= calibrator=
cleanup() {
  set +e  # every step of the cleanup is tried, whatever the one before did
  # The calibration stops at its step's end on SIGTERM (its journal sealed aborted), then the
  # replica's whole group goes.
  if [ -n "$calibrator" ] && kill -TERM "$calibrator" 2>/dev/null; then
    for _ in $(seq 1 60); do kill -0 "$calibrator" 2>/dev/null || break; sleep 1; done
  fi
  [ -n "$replica" ] && kill -TERM -- "-$replica" 2>/dev/null && sleep 5 && kill -KILL -- "-$replica" 2>/dev/null
  # A group empties when its last process has exited: retry for up to 20 s, then say what is left.
  local g tries
  for g in "${groups[@]}"; do
    for tries in $(seq 1 20); do rmdir "$g" 2>/dev/null && break; sleep 1; done
    [ -d "$g" ] && echo "calibrate.sh: could not remove $g (still in use); remove it by hand" >&2
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setsid bash -c "$(declare -f join); join ${target_tasks[*]}; exec bash '$vllm' serve $port tiny" \
  > "$out/replica.log" 2>&1 &
replica=$!
for i in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 "$replica" 2> /dev/null || { echo "calibrate.sh: the replica exited; see $out/replica.log" >&2; exit 1; }
  sleep 1
done
echo "replica ready after $i s"
bash -c "$(declare -f join); join ${recorder_tasks[*]}; exec '$bin' calibrate '$out/cal.toml' -o '$out/out' --force" &
calibrator=$!
# Waited on in the background, so that a SIGINT or SIGTERM reaches the trap at once.
status=0
wait "$calibrator" || status=$?
calibrator=
exit "$status"
