scenario "malformed-gauntlet" {
  description = "malformed requests to every RPC of random nodes (random protobuf bytes, bad JSON, wrong values, truncated and 9 MiB bodies) while publishing and a node is restarted: every answer is a clear client error, nothing panics, no acknowledged record is lost"
  nodes    = 3
  duration = "30s"
  short    = "20s"

  workload {
    publishers = 2
    rate       = 40
    followers  = true
    gauntlet   = true
  }

  fault "restart" {
    action = "restart"
    target = "random"
    start  = "8s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 0.11 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "2s"
  }
}
