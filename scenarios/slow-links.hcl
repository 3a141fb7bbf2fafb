scenario "slow-links" {
  description = "the leader's links get 80 ms of latency with 60 ms of jitter, then a random member's are capped at 256 KiB/s while large records pour in: replication slows, nothing is lost or reordered"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers  = 3
    rate        = 40
    value_bytes = 2048
    followers   = true
    replays     = 1
  }

  fault "latency" {
    action = "delay"
    value  = "80ms~60ms"
    target = "leader"
    start  = "3s"
    hold   = "8s"
  }

  fault "narrow" {
    action = "bandwidth"
    value  = "256KiB"
    target = "random"
    start  = "13s"
    hold   = "8s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.69 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
