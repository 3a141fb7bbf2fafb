scenario "slow-fsync" {
  description = "every fsync of the leader of partition 0 takes 200 ms for 8 s, twice: its publishes slow down, nothing is lost, and it recovers when the disk does (needs a failpoints build)"
  nodes    = 3
  duration = "35s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "slow-disk" {
    action    = "failpoint"
    failpoint = "fsync-delay"
    value     = "200ms"
    target    = "leader"
    start     = "4s"
    hold      = "8s"
    every     = "14s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.09 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
