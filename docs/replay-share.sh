#!/usr/bin/env bash
# The --replay-share trade-off on this machine: for each share, a fresh
# node with a HISTORY-record topic; live publishes at LAT_RATE/s for
# LAT_DUR seconds (rewind bench latency) alone and while STREAMS replays
# loop (rewind bench replay --streams), REPS times. Prints RESULT lines.
#
#   REWIND=/tmp/rewind docs/replay-share.sh
set -u
REWIND=${REWIND:?set REWIND to a rewind binary}
SHARES=${SHARES:-0.05 0.1 0.25 0.5 1}
STREAMS=${STREAMS:-1}
HISTORY=${HISTORY:-2000000}
LAT_RATE=${LAT_RATE:-2000}
LAT_DUR=${LAT_DUR:-10}
REPS=${REPS:-2}
ADDR=127.0.0.1:${PORT:-7091}
delivered() { curl -fsS "http://$ADDR/metrics" | awk '$1 == "rewind_records_delivered_total" { printf "%.0f\n", $2 }'; }
for share in $SHARES; do
  dir=$(mktemp -d -t replay-share.XXXXXX)
  "$REWIND" serve --listen "$ADDR" --data "$dir" --replay-share "$share" >"$dir.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do "$REWIND" --server "$ADDR" topic list >/dev/null 2>&1 && break; sleep 0.1; done
  "$REWIND" --server "$ADDR" bench publish --topic history --partitions 1 --records "$HISTORY" >/dev/null
  for ((r = 1; r <= REPS; r++)); do
    "$REWIND" --server "$ADDR" bench latency --rate "$LAT_RATE" --duration "${LAT_DUR}s" | grep ^RESULT |
      sed "s/^RESULT /RESULT share=$share streams=0 run=$r /"
    "$REWIND" --server "$ADDR" bench replay --topic history --streams "$STREAMS" --duration "$((LAT_DUR + 3))s" >/dev/null &
    load=$!
    sleep 1
    # The replay rate during the latency run, from the node's own counter
    # (outside it the node has no live work, and replays run unbudgeted).
    d0=$(delivered) t0=$(date +%s.%N)
    "$REWIND" --server "$ADDR" bench latency --rate "$LAT_RATE" --duration "${LAT_DUR}s" | grep ^RESULT |
      sed "s/^RESULT /RESULT share=$share streams=$STREAMS run=$r /"
    d1=$(delivered) t1=$(date +%s.%N)
    wait "$load"
    echo "RESULT share=$share streams=$STREAMS run=$r kind=replay_load msgs_per_s=$(awk -v a="$d0" -v b="$d1" -v t0="$t0" -v t1="$t1" 'BEGIN{printf "%.0f", (b-a)/(t1-t0)}')"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null
  rm -rf "$dir" "$dir.log" "$dir.load"
done
