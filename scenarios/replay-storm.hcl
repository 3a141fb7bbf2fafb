scenario "replay-storm" {
  description = "8 full replays of the whole topic loop for 12 s while 3 publishers send at a fixed rate (after a quiet start that sets the baseline), then the leader is paused once: live publishing keeps its latency within a bound of the quiet p99, and the replays keep going"
  nodes    = 3
  duration = "40s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 100
    followers  = true
    replays    = 1
  }

  fault "storm" {
    action = "replay-storm"
    value  = "8"
    target = "all"
    start  = "8s"
    hold   = "12s"
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "22s"
    hold   = "3s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.24 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within   = "4s"
    publish_p99_after = "2s"
    publish_p99_ratio = 3
  }
}
