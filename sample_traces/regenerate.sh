#!/usr/bin/env bash
# Regenerate the committed sample traces from real runs of the runtime (4 MPI ranks, numpy/torch CPU).
#
#   bash sample_traces/regenerate.sh            # all scenarios
#   bash sample_traces/regenerate.sh straggler  # one
#
# two-hosts-slow-link is a real 2 hosts x 2 ranks run on the rehearsal cluster (needs root): the
# cluster is brought up with a rate-limited link (RATE, default 200mbit), the demo's healthy job runs
# across it, and the cluster is always taken down, all under the one-cluster-per-machine lock.
#
# Each scenario is one `ringscope demo` run (viewer/cli/demo.py) writing per-rank traces into
# sample_traces/<scenario>/ (gzipped: the viewer reads .json.gz); few steps keep each directory at a few
# hundred KB. After a run the
# script prints `ringscope summarize` for a quick look. tests/viewer/test_sample_traces.py checks that
# the analyses find what each scenario planted.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(healthy straggler tiny-tensors large-tensors hang slow-data cpu-contention
                                        two-hosts-slow-link elastic ddp-straggler)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for s in "${SCENARIOS[@]}"; do
  # the root-cause scenarios (and healthy, their negative) compare phases step by step: a few more steps
  case "$s" in healthy|straggler|slow-data|cpu-contention|two-hosts-slow-link) n=${STEPS:-6} ;; *) n=${STEPS:-4} ;; esac
  out="sample_traces/$s"
  if [ "$s" = two-hosts-slow-link ] && [ "$(id -u)" != 0 ]; then
    echo "== $s: skipped (the rehearsal cluster needs root); the committed traces are left as they are"
    continue
  fi
  rm -rf "$out"
  mkdir -p "$out"
  echo "== $s -> $out"
  if [ "$s" = hang ]; then
    # What a user has after killing a hung job: one rank never submits a tensor, nothing shuts the
    # job down, and once the stall inspector has reported it, the whole job gets SIGKILL, so no rank
    # closes its trace. (`ringscope demo --scenario hang` instead ends by the stall-shutdown error.)
    RINGSCOPE_STALL_CHECK_TIME_SECONDS=1 PYTHONPATH=. setsid "$PY" -m collectives.launcher -np 4 \
      --timeline "$out/" collectives/torch/demo_train.py --scenario hang --steps 6 --hang-step 3 &
    job=$!
    for _ in $(seq 120); do
      grep -qs '"STALL"' "$out/rank-00000.json" && break
      sleep 0.5
    done
    sleep 1.5   # let every writer flush once more
    kill -9 -- "-$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
  elif [ "$s" = two-hosts-slow-link ]; then
    # one cluster per machine: hold its lock from up to down; down runs however the job ends
    if ! flock /tmp/ringscope-cluster.lock env PY="$PY" OUT="$out" N="$n" RATE="${RATE:-200mbit}" bash -c '
        trap "\"\$PY\" -m viewer.cli cluster down" EXIT
        "$PY" -m viewer.cli cluster up --hosts 2 --slots 2 --rate "$RATE" || exit 2
        "$PY" -m viewer.cli run -np 4 -H h0:2,h1:2 --cluster --timeline "$OUT/" \
          collectives/torch/demo_train.py --scenario healthy --steps "$N"'; then
      echo "== $s: not regenerated (see above; the cluster needs root)"
      continue
    fi
  elif [ "$s" = elastic ]; then
    # An elastic job (docs/ELASTIC.md): 4 ranks, rank 2 SIGKILLs itself after step 10 -> 3 ranks
    # from the last commit; rank 0 then makes the discovery script report one more slot -> the
    # next commit interrupts -> 4 ranks again. elastic.json stays plain; gen-NNN/ hold the ranks.
    tmp=$(mktemp -d)
    printf '#!/bin/sh\nif [ -f %s/grow ]; then echo localhost:5; else echo localhost:4; fi\n' "$tmp" \
      > "$tmp/discover.sh"
    chmod +x "$tmp/discover.sh"
    RINGSCOPE_ELASTIC_DISCOVERY_INTERVAL=0.3 "$PY" -m collectives.launcher --elastic -np 4 --min-np 2 \
      --max-np 4 --host-discovery-script "$tmp/discover.sh" --timeline "$out/" \
      tests/elastic/train_elastic.py --log "$tmp/log.jsonl" --kill-rank 2 --kill-at-step 10 \
      --touch "$tmp/grow" --touch-at-step 16 --step-sleep 0.03
    rm -rf "$tmp"
  elif [ "$s" = ddp-straggler ]; then
    # torch's DDP on gloo under torchrun, traced by hvd.timeline.watch, each rank bound to a core; 12 steps
    # (DDP's first is its one-bucket step)
    "$PY" -m viewer.cli demo --ddp --scenario straggler --ranks 4 --steps "${STEPS:-12}" --out "$out" --no-view
  else
    "$PY" -m viewer.cli demo --scenario "$s" --ranks 4 --steps "$n" --out "$out" --no-view
  fi
  rm -rf "$out/.ringscope-cache"
  if [ "$s" = elastic ]; then
    gzip -9 -f "$out"/gen-*/*.json
  else
    gzip -9 -f "$out"/*.json   # the viewer reads .json.gz directly; ~15x smaller to commit
  fi
  du -sh "$out"
  echo "load after $s: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$PY" -m viewer.cli summarize "$out" --top 5 --no-cache || true
done
