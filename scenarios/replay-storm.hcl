scenario "replay-storm" {
  description = "8 replays from random positions loop while publishers send at a fixed rate and the leader is paused once: live publishing keeps its bounds"
  nodes    = 3
  duration = "40s"
  short    = "20s"

  workload {
    publishers = 3
    rate       = 100
    followers  = true
    replays    = 8
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "8s"
    hold   = "3s"
  }

  bounds {
    recover_within   = "6s"
    publish_p99_after = "2s"
  }
}
