scenario "retention-edge" {
  description = "a topic keeping only its newest 200 records per partition while leaders are killed: replays and followers race retention, and no record that is still kept may be lost"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  topic "chaos" {
    partitions        = 2
    replication       = 3
    retention_records = 200
  }

  workload {
    publishers = 3
    rate       = 80
    followers  = true
    replays    = 2
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "5s"
    hold   = "2s"
    every  = "10s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.21 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "5s"
  }
}
