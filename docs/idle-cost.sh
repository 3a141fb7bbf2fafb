#!/usr/bin/env bash
# CPU an idle three-member cluster spends per member, by partition count:
# the "What idle partitions cost" figures in docs/benchmarks.md, with each
# member's resident memory at the end.
#
#   REWIND=<rewind binary> docs/idle-cost.sh 0 30 300
set -euo pipefail
RW=${REWIND:-rewind}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for P in "$@"; do
  rm -rf "$dir"/* && cd "$dir"
  IC=1=127.0.0.1:17181,2=127.0.0.1:17182,3=127.0.0.1:17183
  pids=()
  for i in 1 2 3; do
    "$RW" serve --node-id $i --listen 127.0.0.1:1718$i --data d$i --initial-cluster $IC --log-level warn >log$i 2>&1 &
    pids+=($!)
  done
  sleep 3
  left=$P n=0
  while [ "$left" -gt 0 ]; do
    c=$(( left > 100 ? 100 : left ))
    "$RW" --server 127.0.0.1:17181 topic create t$n --partitions $c --replication-factor 3 >/dev/null
    left=$((left - c)) n=$((n + 1))
  done
  sleep 15 # leaders elected, the cluster idle
  ticks() { for p in "${pids[@]}"; do awk '{print $14+$15}' /proc/$p/stat; done; }
  a=($(ticks)); sleep 20; b=($(ticks))
  hz=$(getconf CLK_TCK)
  for i in 0 1 2; do
    rss=$(awk '/^VmRSS/ {print $2}' /proc/${pids[$i]}/status)
    echo "partitions=$P node$((i + 1)) cpu=$(echo "scale=2; (${b[$i]}-${a[$i]})*100/$hz/20" | bc)% rss_mib=$((rss / 1024))"
  done
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
done
