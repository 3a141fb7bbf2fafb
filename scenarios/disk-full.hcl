scenario "disk-full" {
  description = "one node's disk is full for 5 s (every write fails with ENOSPC, no free space): it refuses publishes, hands its leaders away, takes no raft traffic and must not exit; space comes back and it catches up by itself, without a restart (needs a failpoints build)"
  nodes    = 3
  duration = "35s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
  }

  fault "enospc" {
    action    = "failpoint"
    failpoint = "enospc"
    target    = "random"
    start     = "5s"
    hold      = "5s"
    every     = "14s"
  }
}
