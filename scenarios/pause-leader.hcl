scenario "pause-leader" {
  description = "SIGSTOP the leader of partition 0 for 5 s, every 12 s: a gray failure, alive to the kernel and silent to everyone"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "4s"
    hold   = "5s"
    every  = "12s"
  }

  # The failover target: 1 s. The failure detector elects a new leader
  # about 0.5 s into the pause, and the clients' hedges (0.5 s) take a
  # publish waiting on the paused node elsewhere. docs/benchmarks.md,
  # "Failover under a second", has every trial with each client.
  bounds {
    failover_within    = "1s"
    publish_p99_during = "1500ms"
  }
}
