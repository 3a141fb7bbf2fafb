scenario "pause-kill" {
  description = "choreography of gray and hard failures: the leader of partition 1 is paused while a random node is killed and brought back, then the other way round"
  nodes    = 3
  duration = "50s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "pause" {
    action = "pause"
    target = "leader:1"
    start  = "4s"
    hold   = "4s"
    every  = "13s"
  }

  fault "kill" {
    action = "kill"
    target = "random"
    start  = "10s"
    hold   = "3s"
    every  = "13s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.05 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a paused or killed
  # leader costs the 2 s client attempt timeout or an election.
  bounds {
    failover_within = "4s"
  }
}
