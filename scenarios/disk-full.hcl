scenario "disk-full" {
  description = "writes fail with ENOSPC on one node for 5 s: its store fails, it exits, the others go on; space comes back and it is started again (needs a failpoints build)"
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
