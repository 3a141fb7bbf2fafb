scenario "one-way-loss" {
  description = "what the leader of partition 0 sends to one other member is lost while what it receives passes, for 8 s, twice: heartbeats go unanswered one way, elections must not flap forever, nothing acknowledged is lost"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "one-way" {
    action = "one-way"
    target = "leader"
    start  = "4s"
    hold   = "8s"
    every  = "15s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.07 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
