#!/bin/bash
# Where the client's time after vLLM's first token goes on this placement (issue 52): one vLLM
# replica addressed directly (no proxy), on CPU 1 at half a CPU as the study places each
# replica, the recorder on CPU 0; 20 rps (0.65 x the day's 32) for 45 s, `direct.toml`. The
# replica's CPU quota is written against a CFS period of PERIOD_US (the kernel's default is
# 100000: 50 ms of CPU, then a wait to the next period once it is spent), so that two runs tell
# whether the quota's period holds the tokens the client reads late.
#
#   bash studies/replica-loss-vllm/cfs-period/run.sh PERIOD_US OUT [RATE]
#
# RATE (requests/s, default 20) replaces `direct.toml`'s rate; the configuration recorded is
# OUT/direct.toml.
#
# Needs root (control groups; v1 or v2), vllm-cpu.sh with its setup done (PERCENTES_VLLM_CPU)
# and percentes (PERCENTES_BIN). Writes OUT/run.pj, OUT/report/ and the replica group's
# cpu.stat before and after the recording. About 3 minutes.
set -euo pipefail
period=${1:?usage: run.sh PERIOD_US OUT [RATE]}; out=${2:?usage: run.sh PERIOD_US OUT [RATE]}
rate=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
vllm=${PERCENTES_VLLM_CPU:-$here/../../../../shared/real-targets/vllm-cpu.sh}
bin=${PERCENTES_BIN:-percentes}
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (control groups)" >&2; exit 1; }
[ -f "$vllm" ] || { echo "run.sh: no vllm-cpu.sh at $vllm (set PERCENTES_VLLM_CPU)" >&2; exit 1; }
mkdir -p "$out"
sed -e "s/^rate_rps = .*/rate_rps = $rate/" "$here/direct.toml" > "$out/direct.toml"
tag=percentes-cfs-$$; cg=/sys/fs/cgroup
if [ -f $cg/cgroup.controllers ]; then
  mkdir -p $cg/$tag/target $cg/$tag/recorder
  echo "+cpuset +cpu" > $cg/cgroup.subtree_control; echo "+cpuset +cpu" > $cg/$tag/cgroup.subtree_control
  echo 1 > $cg/$tag/target/cpuset.cpus; echo 0 > $cg/$tag/recorder/cpuset.cpus
  echo "$((period / 2)) $period" > $cg/$tag/target/cpu.max
  echo 10000 > $cg/$tag/cpu.weight; echo 10000 > $cg/$tag/recorder/cpu.weight
  target_tasks=($cg/$tag/target/cgroup.procs); recorder_tasks=($cg/$tag/recorder/cgroup.procs)
  stat=$cg/$tag/target/cpu.stat; groups=($cg/$tag/target $cg/$tag/recorder $cg/$tag)
else
  for c in cpuset cpu; do mkdir -p $cg/$c/$tag/target $cg/$c/$tag/recorder; done
  mems=$(cat $cg/cpuset/cpuset.mems)
  cat $cg/cpuset/cpuset.cpus > $cg/cpuset/$tag/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/cpuset.mems
  echo 1 > $cg/cpuset/$tag/target/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/target/cpuset.mems
  echo 0 > $cg/cpuset/$tag/recorder/cpuset.cpus; echo "$mems" > $cg/cpuset/$tag/recorder/cpuset.mems
  echo "$period" > $cg/cpu/$tag/target/cpu.cfs_period_us
  echo "$((period / 2))" > $cg/cpu/$tag/target/cpu.cfs_quota_us
  echo 262144 > $cg/cpu/$tag/cpu.shares; echo 262144 > $cg/cpu/$tag/recorder/cpu.shares
  target_tasks=($cg/cpuset/$tag/target/tasks $cg/cpu/$tag/target/tasks)
  recorder_tasks=($cg/cpuset/$tag/recorder/tasks $cg/cpu/$tag/recorder/tasks)
  stat=$cg/cpu/$tag/target/cpu.stat
  groups=($cg/cpuset/$tag/target $cg/cpuset/$tag/recorder $cg/cpuset/$tag
          $cg/cpu/$tag/target $cg/cpu/$tag/recorder $cg/cpu/$tag)
fi
join() { local f; for f in "$@"; do echo "$BASHPID" > "$f"; done; }
replica=
cleanup() {
  set +e
  [ -n "$replica" ] && kill -TERM -- "-$replica" 2>/dev/null && sleep 5 && kill -KILL -- "-$replica" 2>/dev/null
  local g tries
  for g in "${groups[@]}"; do
    for tries in $(seq 1 20); do rmdir "$g" 2>/dev/null && break; sleep 1; done
    [ -d "$g" ] && echo "run.sh: could not remove $g (still in use); remove it by hand" >&2
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
setsid bash -c "$(declare -f join); join ${target_tasks[*]}; exec bash '$vllm' serve 18700 tiny" \
  > "$out/replica.log" 2>&1 &
replica=$!
for i in $(seq 1 600); do
  curl -sf http://127.0.0.1:18700/health > /dev/null && break
  kill -0 "$replica" 2> /dev/null || { echo "run.sh: the replica exited; see $out/replica.log" >&2; exit 1; }
  sleep 1
done
echo "replica ready after $i s"
cp "$stat" "$out/cpu.stat.before"
status=0
bash -c "$(declare -f join); join ${recorder_tasks[*]}; exec '$bin' record '$out/direct.toml' -o '$out/run.pj'" || status=$?
cp "$stat" "$out/cpu.stat.after"
"$bin" analyze "$out/run.pj" -o "$out/report" --diagnose > "$out/analyze.txt" || true
exit "$status"
