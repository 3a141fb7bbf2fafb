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

  bounds {
    recover_within = "6s"
  }
}
