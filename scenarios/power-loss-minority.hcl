scenario "power-loss-minority" {
  description = "power cuts on one node at a time: it runs with writes held in memory until synced, and is killed -9, so everything it did not sync is gone; it restarts and catches up (needs a failpoints build)"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 60
    followers  = true
    replays    = 1
  }

  fault "power-cut" {
    action = "power-loss"
    target = "random"
    start  = "5s"
    hold   = "2s"
    every  = "9s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.30 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "5s"
  }
}
