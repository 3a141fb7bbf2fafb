#!/usr/bin/env bash
# What idle partitions cost one node: CPU over 20 s and resident memory of
# a single `rewind serve` (replication factor 1), by partition count, in
# topics of at most 1,024 partitions. The figures behind the per-topic cap
# in docs/operations.md ("How many partitions").
#
#   REWIND=<rewind binary> docs/partition-cost.sh 0 1024 4096
set -euo pipefail
RW=${REWIND:-rewind}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for P in "$@"; do
  rm -rf "${dir:?}"/* && cd "$dir"
  "$RW" serve --listen 127.0.0.1:17191 --data d --log-level warn >log 2>&1 &
  pid=$!
  for _ in $(seq 50); do "$RW" --server 127.0.0.1:17191 topic list >/dev/null 2>&1 && break; sleep 0.2; done
  left=$P n=0
  while [ "$left" -gt 0 ]; do
    c=$(( left > 1024 ? 1024 : left ))
    "$RW" --server 127.0.0.1:17191 topic create t$n --partitions $c >/dev/null
    left=$((left - c)) n=$((n + 1))
  done
  sleep 15 # the groups elected, the node idle
  ticks() { awk '{print $14+$15}' /proc/$pid/stat; }
  a=$(ticks); sleep 20; b=$(ticks)
  hz=$(getconf CLK_TCK)
  rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
  heap=$(curl -s 127.0.0.1:17191/metrics | awk '/^go_memstats_heap_inuse_bytes/ {printf "%d", $2/1048576}')
  echo "partitions=$P cpu=$(echo "scale=2; ($b-$a)*100/$hz/20" | bc)% rss_mib=$((rss / 1024)) heap_inuse_mib=${heap:-?}"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
