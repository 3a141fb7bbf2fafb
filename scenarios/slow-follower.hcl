scenario "slow-follower" {
  description = "a replica of every partition is down for 15 s while publishers run flat out, then catches up from the leaders"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 4
    followers  = true
    replays    = 1
  }

  fault "down" {
    action = "kill"
    target = "node:3"
    start  = "3s"
    hold   = "15s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.20 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
