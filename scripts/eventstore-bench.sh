#!/usr/bin/env bash
# The event store beside PostgreSQL, in one run (issue 26; docs/benchmarks.md,
# "Event store"). The systems take turns within each repetition, so both see
# the same machine.
#
#   load    a 20-event entity from a history of 100 k and of 10 M events
#           (rewind bench eventstore-load | probe pg-load), ITERS loads each
#   append  load-decide-append at 1, 16 and 64 writers over 10,000 and over 10
#           entities (rewind bench eventstore-append | probe pg-append)
#   dcb     tag-conditioned appends, 16 writers over 1,000 and over 10 tags
#           (rewind bench eventstore-dcb | probe pg-dcb)
#   publish 1 M keyed and keyless publishes, and keyed publishes on the commit
#           before the key index (REWIND_PREV_ADDR), rewind bench publish
#
# H2=1 also runs every Rewind case with --fast-path=false (system rewind-h2):
# unary calls over HTTP/2 instead of the fast path, in the same run.
#
# Every RESULT line is rewritten to case=<case>/<system>, and the end prints
# the median, min and max over REPS (shared/peers/summarize.sh).
#
# Needs running servers, filled once with FILL=1 (or before):
#   REWIND          a rewind binary (the client)
#   PROBE           shared/peers/probe built
#   R100K, R10M     rewind serve addresses holding the 100 k and 10 M histories
#                   (topic "es"); RW: a third node for appends and publishes;
#                   RPREV (optional): the previous commit's binary serving
#   PGDSN           postgres://user:pass@127.0.0.1:5432 (no database): the
#                   databases es100k, es10m and esappend must exist
#
#   REWIND=/tmp/rewind PROBE=/tmp/probe R100K=http://127.0.0.1:7170 \
#     R10M=http://127.0.0.1:7171 RW=http://127.0.0.1:7172 \
#     RPREV=http://127.0.0.1:7173 PGDSN=postgres://postgres:pg@127.0.0.1:5432 \
#     REPS=3 scripts/eventstore-bench.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/peers}
REWIND=${REWIND:?set REWIND to a rewind binary}
PROBE=${PROBE:?set PROBE to the peers probe binary}
PGDSN=${PGDSN:?set PGDSN}
R100K=${R100K:?} R10M=${R10M:-} RW=${RW:?} RPREV=${RPREV:-}
REPS=${REPS:-3}
ITERS=${ITERS:-2000}
DUR=${DUR:-10s}
CASES=${CASES:-load append dcb publish}
WRITERS=${WRITERS:-1 16 64}
PUB_RECORDS=${PUB_RECORDS:-1000000}
OUT=${OUT:-$(mktemp -d -t es-bench.XXXXXX)}
mkdir -p "$OUT"
RES=$OUT/results.txt
: >"$RES"
echo "output in $OUT" >&2

pg() { echo "$PGDSN/$1?sslmode=disable"; }
# rw CASE ARGS...: a rewind client command, and with H2=1 the same over
# HTTP/2; its RESULT lines go to CASE under rewind (and rewind-h2).
rw() {
	local c=$1
	shift
	"$REWIND" "$@" | emit "$c" rewind
	if [[ ${H2:-0} == 1 ]]; then
		"$REWIND" --fast-path=false "$@" | emit "$c" rewind-h2
	fi
}
# emit CASE SYSTEM: the RESULT lines of stdin, renamed and kept.
emit() { grep '^RESULT' | sed -E "s/^RESULT (case=[^ ]+ )?/RESULT case=$1\/$2 /" | tee -a "$RES"; }
stamp() { echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$RES" >&2; }

if [[ ${FILL:-0} == 1 ]]; then
	stamp fill
	"$REWIND" --server "$R100K" bench eventstore-fill --events 100000 | emit fill-100k rewind
	"$REWIND" --server "$R10M" bench eventstore-fill --events 10000000 | emit fill-10m rewind
	"$PROBE" pg-fill -dsn "$(pg es100k)" -n 100000 -streams 5000 | emit fill-100k pg
	"$PROBE" pg-fill -dsn "$(pg es10m)" -n 10000000 -streams 500000 | emit fill-10m pg
fi

for rep in $(seq "$REPS"); do
	for c in $CASES; do
		case $c in
		load)
			for h in 100k ${R10M:+10m}; do
				addr=$R100K
				[[ $h == 10m ]] && addr=$R10M
				stamp "rep $rep load $h"
				rw "load-$h" --server "$addr" bench eventstore-load --key k4242 --iters "$ITERS"
				"$PROBE" pg-load -dsn "$(pg "es$h")" -stream s-4242 -iters "$ITERS" | emit "load-$h" pg
			done
			;;
		append)
			for k in 10000 10; do
				for w in $WRITERS; do
					stamp "rep $rep append keys $k writers $w"
					rw "append-k$k-w$w" --server "$RW" bench eventstore-append --keys "$k" --writers "$w" --duration "$DUR"
					"$PROBE" pg-append -dsn "$(pg esappend)" -streams "$k" -writers "$w" -dur "$DUR" | emit "append-k$k-w$w" pg
				done
			done
			;;
		dcb)
			for t in 1000 10; do
				stamp "rep $rep dcb tags $t"
				rw "dcb-t$t-w16" --server "$RW" bench eventstore-dcb --tags "$t" --writers 16 --duration "$DUR"
				"$PROBE" pg-dcb -dsn "$(pg esappend)" -tags "$t" -writers 16 -dur "$DUR" | emit "dcb-t$t-w16" pg
			done
			;;
		publish)
			stamp "rep $rep publish"
			"$REWIND" --server "$RW" bench publish --topic pub-keyless --records "$PUB_RECORDS" | emit publish-keyless rewind
			"$REWIND" --server "$RW" bench publish --topic pub-keyed --keys --records "$PUB_RECORDS" | emit publish-keyed rewind
			if [[ -n $RPREV ]]; then
				"$REWIND" --server "$RPREV" bench publish --topic pub-keyless --records "$PUB_RECORDS" | emit publish-keyless rewind-prev
				"$REWIND" --server "$RPREV" bench publish --topic pub-keyed --keys --records "$PUB_RECORDS" | emit publish-keyed rewind-prev
			fi
			;;
		esac
	done
done
stamp done
"$PEERS/summarize.sh" "$RES" | tee "$OUT/summary.md"
