scenario "leader-kill-loop" {
  description = "kill -9 the leader of partition 0 every 12 s while publishing, following, replaying and reading in a group; the node comes back 3 s later"
  nodes    = 3
  duration = "60s"
  short    = "30s"

  topic "chaos" {
    partitions  = 3
    replication = 3
  }

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 2
    group "readers" {
      members = 2
    }
  }

  fault "kill-leader" {
    action = "kill"
    target = "leader"
    start  = "5s"
    hold   = "3s"
    every  = "12s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.68 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within    = "3s"
    publish_p99_during = "5s"
  }
}
