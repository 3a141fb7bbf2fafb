#!/usr/bin/env bash
# Two builds of rewind side by side, taking turns on one machine: publish
# throughput (batched and keyed), a full replay, and live publish latency at
# a steady rate, each on a fresh data directory per build. Only ratios from
# one run count on a machine whose speed drifts (docs/benchmarks.md).
#
#   A=/tmp/rewind-before B=/tmp/rewind-after REPS=3 scripts/ab-bench.sh
#
# Each RESULT line gets build=A or build=B; the end prints the median (min,
# max) per case and build.
set -u
A=${A:?set A to the first rewind binary}
B=${B:?set B to the second rewind binary}
REPS=${REPS:-3}
RECORDS=${RECORDS:-1000000}
TMP=$(mktemp -d)
trap 'for f in "$TMP"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; rm -rf "$TMP"' EXIT

serve() { # name binary port
	"$2" serve --listen "127.0.0.1:$3" --data "$TMP/data-$1" --log-level warn >"$TMP/$1.log" 2>&1 &
	echo $! >"$TMP/$1.pid"
	for _ in $(seq 100); do
		"$2" --server "http://127.0.0.1:$3" topic list >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "rewind $1 did not start" >&2
	exit 1
}

serve A "$A" 17401
serve B "$B" 17402
run() { # build binary port rep
	local s="--server http://127.0.0.1:$3"
	"$2" $s bench publish --topic "pub-$4" --records "$RECORDS" --size 100 --partitions 4 --batch 1000 --publishers 4 | grep RESULT
	"$2" $s bench publish --topic "keyed-$4" --keys --records "$RECORDS" --size 100 --partitions 4 --batch 1000 --publishers 4 | grep RESULT |
		sed 's/case=rewind-pub-100B/case=rewind-pub-keyed-100B/'
	"$2" $s bench replay --topic "pub-$4" | grep RESULT
	"$2" $s bench latency --topic "lat-$4" --rate 2000 --duration 10s | grep RESULT
}
for rep in $(seq "$REPS"); do
	# Alternate which build goes first.
	if [ $((rep % 2)) = 1 ]; then order="A B"; else order="B A"; fi
	for b in $order; do
		if [ "$b" = A ]; then run A "$A" 17401 "$rep"; else run B "$B" 17402 "$rep"; fi | sed "s/^RESULT /RESULT build=$b /"
	done
done | tee "$TMP/results"
echo "# median (min, max) over $REPS"
awk '
/^RESULT/ {
	b=""; c=""; for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "build") b = kv[2]; if (kv[1] == "case") c = kv[2] }
	for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] ~ /^(msgs_per_s|p50_ms|p99_ms)$/) { k = c "/" kv[1] "/" b; v[k] = v[k] " " kv[2] } }
}
END { for (k in v) print k, v[k] }' "$TMP/results" | sort | while read -r k vals; do
	sorted=$(echo "$vals" | tr ' ' '\n' | sort -g | tr '\n' ' ')
	n=$(echo "$sorted" | wc -w)
	med=$(echo "$sorted" | awk -v n="$n" '{print $(int((n + 1) / 2))}')
	echo "$k median $med (min $(echo "$sorted" | awk '{print $1}'), max $(echo "$sorted" | awk '{print $NF}'))"
done
