scenario "membership-churn" {
  description = "replace members while publishing: a new node joins, a random member's replicas move to it (joint consensus), the member is removed and stopped; twice"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 40
    followers  = true
    replays    = 1
  }

  fault "replace" {
    action = "replace"
    target = "random"
    start  = "5s"
    every  = "18s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 0.27 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "2s"
  }
}
