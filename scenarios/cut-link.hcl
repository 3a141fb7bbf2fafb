scenario "cut-link" {
  description = "the link between the leader of partition 1 and one other member is cut both ways for 10 s, twice (issue 14's first defect): raft keeps its leader, the cut-off member relays its publishes through the third, no publish waits long"
  nodes    = 3
  duration = "40s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "cut" {
    action = "cut"
    target = "leader:1"
    start  = "4s"
    hold   = "10s"
    every  = "16s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.07 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a cut link to the leader
  # costs the 2 s client attempt timeout.
  bounds {
    failover_within    = "4s"
    publish_p99_during = "2500ms"
    publish_p99_after  = "1s"
  }
}
