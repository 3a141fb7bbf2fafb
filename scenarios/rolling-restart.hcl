scenario "rolling-restart" {
  description = "restart every node in turn, gracefully (SIGTERM: leadership handed away first), as a deployment would"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
    group "readers" {
      members = 2
    }
  }

  fault "deploy" {
    action = "rolling-restart"
    target = "all"
    start  = "5s"
    hold   = "4s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.21 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "5s"
  }
}
