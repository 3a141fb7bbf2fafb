scenario "isolate-leader" {
  description = "cut the leader of partition 0 off from both other members for 6 s, twice; PreVote and CheckQuorum move leadership to the majority, and the old leader rejoins"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "isolate" {
    action = "isolate"
    target = "leader"
    start  = "5s"
    hold   = "6s"
    every  = "15s"
  }

  # The failover target: 1 s. The survivors' failure detector elects a new
  # leader about 0.5 s into the cut, and the clients' hedges (0.5 s) take
  # a publish waiting on the cut-off node elsewhere. docs/benchmarks.md,
  # "Failover under a second", has every trial with each client.
  bounds {
    failover_within = "1s"
  }
}
