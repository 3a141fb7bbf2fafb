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

  # The failover target: 1 s. The failure detector elects a new leader
  # about 0.5 s after the kill. docs/benchmarks.md, "Failover under a
  # second", has every trial with each client.
  bounds {
    failover_within    = "1s"
    publish_p99_during = "5s"
  }
}
