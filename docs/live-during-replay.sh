#!/usr/bin/env bash
# Live latency while history replays: Rewind, NATS JetStream and Redis
# Streams on this machine, in one run.
#
# For each system: a 1-partition/stream history of HISTORY records of 100 B;
# then, for N in $REPLAYS (0 = idle), N concurrent full replays of it loop
# back to back while a publisher sends 100 B records at LAT_RATE/s, open
# loop, for LAT_DUR, and measures each publish from send to acknowledgement
# (Rewind also measures publish to delivery to a live subscriber). Every
# case runs REPS times; the systems take turns within each repetition so
# that they see the same machine.
#
# Prints RESULT lines, then a table (median, min-max over REPS), and writes
# live-during-replay.svg (p99 against N, one line per system) to OUT.
#
# Needs: REWIND (a built rewind binary), PEERS (shared/peers, for lib.sh),
# nats-server, nats and probe on PATH or in PEERS_BIN (see shared/peers
# README), redis-server. Everything listens on 127.0.0.1.
#
#   REWIND=/tmp/rewind PEERS_BIN=/tmp/peers docs/live-during-replay.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/peers}
REWIND=${REWIND:?set REWIND to a rewind binary}
HISTORY=${HISTORY:-2000000}
REPLAYS=${REPLAYS:-0 1 4 16}
REPS=${REPS:-3}
LAT_RATE=${LAT_RATE:-2000}
LAT_DUR=${LAT_DUR:-10}
SYSTEMS=${SYSTEMS:-rewind nats redis}
REWIND_FLAGS=${REWIND_FLAGS:-}
# REPLAY_NICE=19 runs the replaying clients at that nice level, as if they
# ran on other machines: the servers (and the latency publisher) then get
# the processors first, and what remains is each server's own isolation.
REPLAY_NICE=${REPLAY_NICE:-0}
OUT=${OUT:-$(mktemp -d -t live-replay.XXXXXX)}
mkdir -p "$OUT"
# shellcheck source=/dev/null
source "$PEERS/lib.sh"
peers_init || exit 1
RES=$OUT/results.txt
[[ ${SUMMARIZE:-0} == 1 ]] || : >"$RES"
RPORT=17070 REDIS_PORT=16379
export PATH="$PEERS_BIN:$PATH"
log "output in $OUT"

emit() { sed "s/^RESULT /RESULT sys=$1 n=$2 run=$3 /; s/ rep=0 / /" | grep '^RESULT' | tee -a "$RES"; }

# --- servers -------------------------------------------------------------
rewind_up() {
  "$REWIND" serve --listen 127.0.0.1:$RPORT --data "$OUT/rewind-data" $REWIND_FLAGS >"$OUT/rewind.log" 2>&1 &
  echo $! >"$OUT/rewind.pid"
  for _ in $(seq 100); do "$REWIND" --server 127.0.0.1:$RPORT topic list >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
redis_up() {
  redis-server --bind 127.0.0.1 --port $REDIS_PORT --dir "$OUT" --save "" --appendonly yes \
    --appendfsync everysec --daemonize no --logfile "$OUT/redis.log" &
  echo $! >"$OUT/redis.pid"
  for _ in $(seq 100); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
stop_pid() { # pidfile
  [[ -e $1 ]] || return 0
  local pid; pid=$(<"$1")
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  rm -f "$1"
}
cleanup() { stop_pid "$OUT/rewind.pid"; stop_pid "$OUT/redis.pid"; nats_down >/dev/null 2>&1; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- one case ------------------------------------------------------------
# replay_load SYS N SECONDS: N replay loops (N processes) in the
# background, each replaying the whole history back to back.
replay_load() {
  local sys=$1 n=$2 secs=$3 i
  LOAD_PIDS=()
  for ((i = 0; i < n; i++)); do
    case $sys in
    rewind) nice -n "$REPLAY_NICE" timeout "$secs" bash -c 'while :; do "$0" --server "$1" bench replay --topic history; done' \
      "$REWIND" 127.0.0.1:$RPORT >/dev/null 2>&1 & ;;
    nats) nice -n "$REPLAY_NICE" timeout "$secs" bash -c 'while :; do nats -s "$0" bench js ordered --stream=history --msgs="$1" --size=100 --no-progress; done' \
      "$NATS_URL" "$HISTORY" >/dev/null 2>&1 & ;;
    redis) nice -n "$REPLAY_NICE" timeout "$secs" bash -c 'while :; do probe redis-replay -addr "$0" -key history -count 1000; done' \
      127.0.0.1:$REDIS_PORT >/dev/null 2>&1 & ;;
    esac
    LOAD_PIDS+=($!)
  done
}
# delivered SYS: records the server has sent so far, read from its own
# counters, so that every system's replay rate covers the same window (the
# latency run) and replays cut off by it count too: Rewind's records
# delivered, NATS's messages out, Redis's XRANGE calls of 1000 entries.
delivered() {
  case $1 in
  rewind) curl -fsS "http://127.0.0.1:$RPORT/metrics" | awk '$1 == "rewind_records_delivered_total" { printf "%.0f\n", $2 }' ;;
  nats) curl -fsS "http://127.0.0.1:$((NATS_BASE_PORT + 4000))/varz" | jq .out_msgs ;;
  redis) redis-cli -p $REDIS_PORT info commandstats | sed -nE 's/^cmdstat_xrange:calls=([0-9]+),.*/\1/p' |
    awk '{print $1 * 1000} END{if (NR == 0) print 0}' ;;
  esac
}
latency() { # sys
  case $1 in
  rewind) "$REWIND" --server 127.0.0.1:$RPORT bench latency --topic live --rate "$LAT_RATE" --duration "${LAT_DUR}s" --e2e ;;
  nats) probe lat -s "$NATS_URL" -subject live -rate "$LAT_RATE" -dur "${LAT_DUR}s" -size 100 ;;
  redis) probe redis-lat -addr 127.0.0.1:$REDIS_PORT -key live -rate "$LAT_RATE" -dur "${LAT_DUR}s" -size 100 ;;
  esac
}

# --- setup: every system up, with its history ----------------------------
# SUMMARIZE=1 only tabulates and plots OUT/results.txt of an earlier run.
[[ ${SUMMARIZE:-0} == 1 ]] && REPS=0 SYSTEMS_SETUP="" || SYSTEMS_SETUP=$SYSTEMS
for sys in $SYSTEMS_SETUP; do
  case $sys in
  rewind)
    rewind_up || { log "rewind did not start"; exit 1; }
    "$REWIND" --server 127.0.0.1:$RPORT bench publish --topic history --partitions 1 --records "$HISTORY" >/dev/null || exit 1 ;;
  nats)
    NATS_URL=$(nats_up_single) || exit 1
    nats -s "$NATS_URL" stream add live --subjects=live --storage=file --replicas=1 --defaults >/dev/null
    nats -s "$NATS_URL" bench js pub async history --create --stream=history --replicas=1 --storage=file \
      --maxbytes=16GB --msgs="$HISTORY" --size=100 --batch=500 --no-progress >/dev/null 2>&1 || exit 1 ;;
  redis)
    redis_up || { log "redis did not start"; exit 1; }
    probe redis-pub -addr 127.0.0.1:$REDIS_PORT -key history -n "$HISTORY" -size 100 -batch 500 >/dev/null || exit 1 ;;
  esac
done

for ((rep = 1; rep <= REPS; rep++)); do
  for n in $REPLAYS; do
    for sys in $SYSTEMS; do
      log "$sys replays=$n rep=$rep"
      replay_load "$sys" "$n" $((LAT_DUR + 3))
      sleep 1
      d0=$(delivered "$sys") t0=$(date +%s.%N)
      latency "$sys" | emit "$sys" "$n" "$rep"
      d1=$(delivered "$sys") t1=$(date +%s.%N)
      [[ $n -gt 0 ]] && wait "${LOAD_PIDS[@]}"
      if [[ $n -gt 0 ]]; then
        # NATS counts the latency publisher's acks, Rewind the live
        # subscriber's records (LAT_RATE/s each): not replay.
        [[ $sys != redis ]] && d0=$(awk -v a="$d0" -v t0="$t0" -v t1="$t1" -v r="$LAT_RATE" 'BEGIN{printf "%.0f", a + r*(t1-t0)}')
        rate=$(awk -v a="$d0" -v b="$d1" -v t0="$t0" -v t1="$t1" 'BEGIN{printf "%.0f", (b-a)/(t1-t0)}')
        echo "RESULT sys=$sys n=$n run=$rep kind=replay_load msgs_per_s=$rate" | tee -a "$RES"
      fi
    done
  done
done

# --- summary ---------------------------------------------------------------
# ack_sel SYS: what marks the publish-to-ack lines (not the senders' lag).
ack_sel() { case $1 in rewind) echo "case=rewind-lat " ;; nats) echo "kind=lat " ;; redis) echo "kind=redis_lat " ;; esac; }
# median (min-max) of KEY for lines matching sys, n and kind
med() { # sys n kind key
  grep "sys=$1 n=$2 " "$RES" | grep "kind=$3" | sed -nE "s/.* $4=([0-9.]+).*/\1/p" | stats |
    awk '{ if ($4 == 0) print "-"; else if ($1 >= 1000) printf "%.0f k (%.0f-%.0f k)", $1/1000, $2/1000, $3/1000; else printf "%.2f (%.2f-%.2f)", $1, $2, $3 }'
}
{
  echo "| system | replays | ack p50 ms | ack p99 ms | ack p99.9 ms | delivery p50 ms | delivery p99 ms | replay records/s |"
  echo "|---|---|---|---|---|---|---|---|"
  for sys in $SYSTEMS; do
    for n in $REPLAYS; do
      ack=$(ack_sel "$sys")
      p50=$(grep "sys=$sys n=$n " "$RES" | grep -e "$ack" | sed -nE 's/.* p50_ms=([0-9.]+).*/\1/p' | stats | awk '{printf "%.2f (%.2f-%.2f)", $1, $2, $3}')
      p99=$(grep "sys=$sys n=$n " "$RES" | grep -e "$ack" | sed -nE 's/.* p99_ms=([0-9.]+).*/\1/p' | stats | awk '{printf "%.2f (%.2f-%.2f)", $1, $2, $3}')
      p999=$(grep "sys=$sys n=$n " "$RES" | grep -e "$ack" | sed -nE 's/.* p999_ms=([0-9.]+).*/\1/p' | stats | awk '{printf "%.2f (%.2f-%.2f)", $1, $2, $3}')
      e50=- e99=-
      if [[ $sys == rewind ]]; then
        e50=$(grep "sys=$sys n=$n " "$RES" | grep "case=rewind-e2e" | sed -nE 's/.* p50_ms=([0-9.]+).*/\1/p' | stats | awk '{printf "%.2f (%.2f-%.2f)", $1, $2, $3}')
        e99=$(grep "sys=$sys n=$n " "$RES" | grep "case=rewind-e2e" | sed -nE 's/.* p99_ms=([0-9.]+).*/\1/p' | stats | awk '{printf "%.2f (%.2f-%.2f)", $1, $2, $3}')
      fi
      rate=-
      [[ $n -gt 0 ]] && rate=$(med "$sys" "$n" replay_load msgs_per_s)
      echo "| $sys | $n | $p50 | $p99 | $p999 | $e50 | $e99 | $rate |"
    done
  done
} | tee "$OUT/table.md"

# --- plot: median ack p99 against replays, one line per system -------------
{
  for sys in $SYSTEMS; do
    sel=$(ack_sel "$sys")
    for n in $REPLAYS; do
      v=$(grep "sys=$sys n=$n " "$RES" | grep -e "$sel" | sed -nE 's/.* p99_ms=([0-9.]+).*/\1/p' | stats | cut -d' ' -f1)
      echo "$sys $n $v"
    done
  done
} | awk -v ns="$REPLAYS" '
  { sys[NR]=$1; n[NR]=$2; v[NR]=$3; if ($3+0 > ymax) ymax=$3+0; if (!($1 in seen)) { seen[$1]=1; order[++k]=$1 } }
  END {
    W=640; H=400; L=60; R=150; T=30; B=50; split(ns, xs, " "); nx=length(xs)
    ymax = ymax * 1.1; if (ymax <= 0) ymax = 1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    printf "<text x=\"%d\" y=\"18\">publish-to-ack p99 (ms) at 2000/s while N full replays loop (median of runs)</text>\n", L
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H-B, W-R, H-B
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H-B
    for (i = 0; i <= 4; i++) { y = H-B - i*(H-B-T)/4; printf "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.1f</text>\n", L-5, y+4, ymax*i/4
      printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>\n", L, y, W-R, y }
    for (j = 1; j <= nx; j++) { x[xs[j]] = L + (j-1)*(W-R-L)/(nx-1 > 0 ? nx-1 : 1)
      printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x[xs[j]], H-B+18, xs[j] }
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">concurrent replays</text>\n", (L+W-R)/2, H-10
    split("#d62728 #1f77b4 #2ca02c #9467bd", col, " ")
    for (s = 1; s <= k; s++) { pts = ""
      for (i = 1; i <= NR; i++) if (sys[i] == order[s] && v[i] != "NA") pts = pts sprintf("%d,%d ", x[n[i]], H-B - v[i]/ymax*(H-B-T))
      printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", col[s], pts
      printf "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", W-R+10, T+20*s, col[s], order[s] }
    print "</svg>"
  }' >"$OUT/live-during-replay.svg"
log "table: $OUT/table.md, plot: $OUT/live-during-replay.svg"
