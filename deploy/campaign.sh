#!/usr/bin/env bash
# A campaign on Kubernetes (issue 38 item 4): RUNS recordings of deploy/recorder-job.yaml in
# sequence, each one's shard journals copied off the volume and merged, then `percentes
# campaign` over the manifests.
#
#   deploy/campaign.sh RUNS OUT_DIR
#
# Before each run it waits until every serving pod is Ready again (the last run deleted one), so
# a run never starts against a replica still warming up. Each run gets a fresh epoch
# PERCENTES_LEAD_S seconds ahead (default 180: time for every shard to be scheduled and pulled).
# A run whose Job fails stops the campaign: a failed shard is not re-run, since a re-run would be
# another schedule start, and the runs before it stay in OUT_DIR. Needs kubectl with the rights
# to manage the Job, its ConfigMap and a pod, and `percentes` on PATH.
#
# Environment: PERCENTES_SERVING_LABEL (app=vllm), PERCENTES_LEAD_S (180),
# PERCENTES_RUN_TIMEOUT_S (3600), PERCENTES_JOB (deploy/recorder-job.yaml).
set -euo pipefail

runs=${1:?usage: deploy/campaign.sh RUNS OUT_DIR}
out=${2:?usage: deploy/campaign.sh RUNS OUT_DIR}
job_file=${PERCENTES_JOB:-deploy/recorder-job.yaml}
serving=${PERCENTES_SERVING_LABEL:-app=vllm}
lead=${PERCENTES_LEAD_S:-180}
run_timeout=${PERCENTES_RUN_TIMEOUT_S:-3600}
job=percentes-recorders
claim=percentes-journals

# The shard count, as the Job's command states it (`--shards N`).
shards=$(sed -n 's/.*--shards \([0-9][0-9]*\).*/\1/p' "$job_file" | head -n 1)
[ -n "$shards" ] || { echo "campaign: $job_file names no --shards N" >&2; exit 1; }
mkdir -p "$out"

for k in $(seq 1 "$runs"); do
    dir="$out/run-$k"
    if [ -e "$dir/run.manifest.json" ]; then
        echo "== run $k of $runs: already in $dir, kept"
        continue
    fi
    echo "== run $k of $runs"
    kubectl wait --for=condition=Ready pod -l "$serving" --timeout=20m
    kubectl delete job "$job" --ignore-not-found --wait=true
    kubectl delete configmap percentes-start --ignore-not-found
    kubectl create configmap percentes-start --from-literal=start_at="$(($(date +%s) + lead))"
    kubectl apply -f "$job_file"

    # Until the Job succeeds or fails (backoffLimit 0: one failed shard fails it).
    waited=0
    while :; do
        failed=$(kubectl get job "$job" -o jsonpath='{.status.failed}')
        if [ "${failed:-0}" -gt 0 ]; then
            echo "campaign: run $k's Job failed (kubectl describe job $job); stopping" >&2
            exit 1
        fi
        succeeded=$(kubectl get job "$job" -o jsonpath='{.status.succeeded}')
        if [ "${succeeded:-0}" -ge "$shards" ]; then
            break
        fi
        if [ "$waited" -ge "$run_timeout" ]; then
            echo "campaign: run $k's Job did not finish in ${run_timeout} s; stopping" >&2
            exit 1
        fi
        sleep 10
        waited=$((waited + 10))
    done

    # The journals, through a pod that mounts the volume; then the volume emptied for the next
    # run (a recorder refuses to overwrite a journal).
    kubectl apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: percentes-fetch
spec:
  restartPolicy: Never
  securityContext:
    runAsUser: 10001
    fsGroup: 10001
  containers:
    - name: fetch
      image: percentes:latest
      command: ["sleep", "3600"]
      volumeMounts:
        - name: journals
          mountPath: /journals
  volumes:
    - name: journals
      persistentVolumeClaim:
        claimName: $claim
EOF
    kubectl wait --for=condition=Ready pod/percentes-fetch --timeout=5m
    mkdir -p "$dir"
    for i in $(seq 0 $((shards - 1))); do
        kubectl cp "percentes-fetch:/journals/shard-$i.pj" "$dir/shard-$i.pj"
    done
    kubectl exec percentes-fetch -- sh -c 'rm -f /journals/shard-*.pj'
    kubectl delete pod percentes-fetch --wait=true
    percentes merge "$dir"/shard-*.pj -o "$dir/run.manifest.json"
done

# The table is written whatever the runs show; the exit is the campaign's own (2 when a run was
# invalid or a group is short of its runs).
status=0
percentes campaign "$out"/run-*/run.manifest.json -o "$out/campaign" || status=$?
echo "campaign: $out/campaign (campaign.md, campaign.json), exit $status"
exit "$status"
