scenario "fsync-eio" {
  description = "fsync fails with EIO on one node: its store fails, it reports NOT_SERVING and exits, the others go on; it is started again once the fault is cleared (needs a failpoints build)"
  nodes    = 3
  duration = "35s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "eio" {
    action    = "failpoint"
    failpoint = "fsync-eio"
    target    = "leader"
    start     = "5s"
    hold      = "4s"
    every     = "12s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.96 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
