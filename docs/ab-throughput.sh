#!/usr/bin/env bash
# Throughput of two rewind binaries, interleaved so both see the same
# machine: a 1 M x 100 B publish (4 partitions, 4 publishers of 1,000-record
# requests) into a fresh node, then 3 single-stream replays of it.
#
#   A=/tmp/rewind-before B=/tmp/rewind-after docs/ab-throughput.sh [ROUNDS]
set -u
A=${A:?set A to a rewind binary} B=${B:?set B to a rewind binary}
ROUNDS=${1:-3}
PORT=${PORT:-7090}
for ((round = 1; round <= ROUNDS; round++)); do
  for bin in "$A" "$B"; do
    dir=$(mktemp -d -t ab-rewind.XXXXXX)
    "$bin" serve --data "$dir" --listen 127.0.0.1:$PORT >"$dir.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do "$bin" --server 127.0.0.1:$PORT topic list >/dev/null 2>&1 && break; sleep 0.1; done
    pub=$("$bin" --server 127.0.0.1:$PORT bench publish --topic bench --records 1000000 --partitions 4 | grep -o 'msgs_per_s=[0-9]*')
    rep=$("$bin" --server 127.0.0.1:$PORT bench replay --topic bench --reps 3 | grep -o 'msgs_per_s=[0-9]*' | tr '\n' ' ')
    echo "round=$round bin=$bin publish $pub replay $rep"
    kill "$pid"
    wait "$pid" 2>/dev/null
    rm -rf "$dir" "$dir.log"
  done
done
