scenario "torn-write" {
  description = "a node crashes in the middle of a write to its log (half of it on disk, then SIGKILL), twice: it restarts from the torn log, drops the torn tail it never acknowledged, and catches up (needs a failpoints build)"
  nodes    = 3
  duration = "35s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 60
    followers  = true
    replays    = 1
  }

  fault "tear" {
    action    = "failpoint"
    failpoint = "torn-write"
    target    = "random"
    start     = "5s"
    hold      = "3s"
    every     = "12s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.08 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "5s"
  }
}
