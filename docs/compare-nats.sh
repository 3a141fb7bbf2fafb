#!/usr/bin/env bash
# Same-run comparison of Rewind and NATS JetStream (single node) on one
# machine: the figures and ratios in docs/benchmarks.md come from this.
#
#   PEERS_BIN=<dir with nats-server, nats, probe> REWIND=<rewind binary> \
#     docs/compare-nats.sh
#
# It uses lib.sh and summarize.sh of the peer baseline (../shared/peers, or
# PEERS_DIR) to run nats-server on loopback; see that README to install the
# NATS binaries. Env: REPS (3), MSGS (1000000), BIG (10000000).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEERS_DIR=${PEERS_DIR:-$HERE/../../shared/peers}
source "$PEERS_DIR/lib.sh"
peers_init || exit 1
trap peers_cleanup EXIT
REPS=${REPS:-3}
MSGS=${MSGS:-1000000}
BIG=${BIG:-10000000}
T=300
RES=$PEERS_OUT/compare.results
REWIND=${REWIND:?path to the rewind binary}
{
  echo "# $(date -u +%FT%TZ) $(nats-server --version) $($REWIND --help >/dev/null && echo rewind) $(go version | awk '{print $3}')"
  echo "# $(nproc) cpus, $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
} >>"$RES"
nb_emit() {
  local c=$1 r=$2 size=$3 f=$4 line rate extra=""
  line=$(grep -E 'stats: [0-9,]+ msgs/sec' "$f" | tail -1)
  [[ -z "$line" ]] && { echo "RESULT kind=nats_bench case=$c rep=$r error=1" | tee -a "$RES"; return; }
  rate=$(sed -E 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/' <<<"$line" | tr -d ,)
  if grep -q 'P50:' <<<"$line"; then
    local p50 p99
    p50=$(sed -nE 's/.*P50: ([0-9.,]+)us.*/\1/p' <<<"$line" | tr -d ,)
    p99=$(sed -nE 's/.* P99: ([0-9.,]+)us.*/\1/p' <<<"$line" | tr -d ,)
    extra=" batch_p50_ms=$(awk -v v="$p50" 'BEGIN{printf "%.3f", v/1000}') batch_p99_ms=$(awk -v v="$p99" 'BEGIN{printf "%.3f", v/1000}')"
  fi
  echo "RESULT kind=nats_bench case=$c rep=$r msgs_per_s=$rate MiB_per_s=$(awk -v r="$rate" -v s="$size" 'BEGIN{printf "%.1f", r*s/1048576}')$extra" | tee -a "$RES"
}
pr_emit() { local c=$1 r=$2; shift 2; timeout "$T" probe "$@" 2>>"$PEERS_OUT/probe.err" | sed "s/^RESULT /RESULT case=$c rep=$r /" | tee -a "$RES"; }
nb() { local f=$1; shift; timeout "$T" nats -s "$URL" bench "$@" --no-progress >"$f" 2>&1 || log "bench exited $? (see $f)"; }
stream_rm() { nats -s "$URL" stream rm -f "$1" >/dev/null 2>&1 || true; }
rw() { timeout "$T" "$REWIND" --server "http://127.0.0.1:17070" "$@"; }
rw_emit() { local c=$1 r=$2; shift 2; rw "$@" | grep '^RESULT' | sed -E "s/case=[^ ]+/case=$c/; s/rep=[0-9]+/rep=$r/" | tee -a "$RES"; }

# ---- NATS R1 (default: no fsync on ack) ----
TOPO=single
URL=$(nats_up_single) || exit 1
for mode in fast async; do
  for ((r = 1; r <= REPS; r++)); do
    stream_rm benchstream
    log "nats pub $mode rep=$r"
    nb "$PEERS_OUT/n-pub-$mode-$r.log" js pub "$mode" events --create --stream=benchstream --replicas=1 --storage=file --maxbytes=16GB --msgs="$MSGS" --size=100 --batch=500
    nb_emit "nats-r1-pub-$mode-100B" "$r" 100 "$PEERS_OUT/n-pub-$mode-$r.log"
  done
done
wait_stream "$URL" benchstream
for ((r = 1; r <= REPS; r++)); do
  nb "$PEERS_OUT/n-replay-pull-$r.log" js ordered --stream=benchstream --msgs="$MSGS" --size=100
  nb_emit "nats-r1-replay-ordered-pull-100B" "$r" 100 "$PEERS_OUT/n-replay-pull-$r.log"
  nb "$PEERS_OUT/n-replay-push-$r.log" oldjs ordered events --stream=benchstream --msgs="$MSGS" --size=100
  nb_emit "nats-r1-replay-ordered-push-100B" "$r" 100 "$PEERS_OUT/n-replay-push-$r.log"
done
stream_rm benchstream
log "nats filling bigstream with $BIG"
nb "$PEERS_OUT/n-big-fill.log" js pub async events --create --stream=bigstream --multisubject --multisubjectmax=100 --replicas=1 --storage=file --maxbytes=16GB --msgs="$BIG" --size=100 --batch=500
nb_emit "nats-r1-pub-async-100B-big" 1 100 "$PEERS_OUT/n-big-fill.log"
wait_stream "$URL" bigstream
for ((r = 1; r <= 5; r++)); do
  pr_emit nats-r1-ttfm-time "$r" ttfm -s "$URL" -stream bigstream -mode time -at 0.5 -n 10000
done
nats_down; nats_wipe
URL=$(NATS_SYNC_INTERVAL=always nats_up_single) || exit 1
for ((r = 1; r <= REPS; r++)); do
  stream_rm benchstream
  nb "$PEERS_OUT/n-sync-$r.log" js pub async events --create --stream=benchstream --replicas=1 --storage=file --maxbytes=16GB --msgs=50000 --size=100 --batch=500
  nb_emit "nats-r1-syncalways-pub-async-100B" "$r" 100 "$PEERS_OUT/n-sync-$r.log"
done
nats_down; nats_wipe

# ---- Rewind (single node, every publish fsynced before the ack) ----
RDATA=$PEERS_DATA/rewind
"$REWIND" serve --listen 127.0.0.1:17070 --data "$RDATA" --log-level warn >"$PEERS_OUT/rewind-serve.log" 2>&1 &
RPID=$!
for i in $(seq 1 100); do rw topic list >/dev/null 2>&1 && break; sleep 0.1; done
for ((r = 1; r <= REPS; r++)); do
  log "rewind pub rep=$r"
  rw_emit rewind-pub-100B "$r" bench publish --topic "pub-$r" --records "$MSGS" --size 100 --partitions 4 --batch 1000 --publishers 4
done
for ((r = 1; r <= REPS; r++)); do
  rw_emit rewind-replay-100B "$r" bench replay --topic pub-1
done
log "rewind filling big with $BIG (1 partition)"
rw_emit rewind-pub-100B-big-1part 1 bench publish --topic big --records "$BIG" --size 100 --partitions 1 --batch 1000 --publishers 4
rw_emit rewind-ttfm-time 1 bench ttfm --topic big --reps 20
for ((r = 1; r <= REPS; r++)); do
  rw_emit rewind-replay-100B-10M-1part "$r" bench replay --topic big
done
kill -TERM "$RPID"; wait "$RPID"
log "results in $RES"
"$PEERS_DIR/summarize.sh" "$RES"
