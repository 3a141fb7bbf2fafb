#!/usr/bin/env bash
# Where a node's publishes spend their time: p50, p90 and p99 of each
# publish timing histogram in its /metrics (rewind_publish_duration_seconds,
# request to acknowledgement, and the stages; bucket bounds, so "< 512 µs"
# means the quantile falls in the bucket below 512 µs), since the node
# started or, with a second argument, over that many seconds from now.
#
#   docs/publish-timings.sh 127.0.0.1:7070 [SECONDS]
set -eu
ADDR=${1:-127.0.0.1:7070}
snap() { curl -fsS "http://$ADDR/metrics" | grep -E '^rewind_(publish|raft)_[a-z]+_seconds_bucket'; }
before=$(mktemp)
if [[ $# -ge 2 ]]; then snap >"$before"; sleep "$2"; else : >"$before"; fi
snap | awk -v prev="$before" '
  BEGIN { while ((getline l < prev) > 0) { split(l, f, " "); p[f[1]] = f[2] } }
  {
    name = $1; sub(/_bucket.*/, "", name)
    le = $1; sub(/.*le="/, "", le); sub(/".*/, "", le)
    n[name] += 0; k = ++n[name]; bound[name, k] = le; cum[name, k] = $2 - p[$1]
  }
  END {
    for (name in n) {
      total = cum[name, n[name]]
      line = sprintf("%-28s n=%-8d", name, total)
      split("0.5 0.9 0.99", qs, " ")
      for (i = 1; i <= 3; i++) {
        if (total == 0) { line = line "   -"; continue }
        for (k = 1; k <= n[name]; k++) if (cum[name, k] >= qs[i] * total) break
        b = bound[name, k]
        top = bound[name, n[name] - 1] # the largest finite bound
        v = (b == "+Inf") ? sprintf("> %.3g s", top) : (b + 0 < 0.001 ? sprintf("< %.0f µs", b * 1e6) : sprintf("< %.3g ms", b * 1e3))
        line = line sprintf("   p%s %s", qs[i] * 100, v)
      }
      print line
    }
  }' | sort
rm -f "$before"
