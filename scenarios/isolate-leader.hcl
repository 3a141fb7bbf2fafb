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

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.27 s and 3.51 s in two runs of 2026-12-07 (--short, seed 1, a busy
  # 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today an isolated leader
  # costs the 2 s client attempt timeout, then an election (CheckQuorum,
  # PreVote).
  bounds {
    failover_within = "5s"
  }
}
