scenario "slow-consumers" {
  description = "a group whose members take 300 ms over every batch falls behind fast publishers while a member crashes now and then and a leader is paused: nothing is skipped, commits never go back"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 100
    group "slow" {
      members = 2
      slow    = "300ms"
      churn   = "6s"
    }
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "8s"
    hold   = "3s"
    every  = "14s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.05 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
