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

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.03 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a paused leader costs
  # the 2 s client attempt timeout, then an election.
  bounds {
    failover_within    = "4s"
    publish_p99_during = "2500ms"
  }
}
