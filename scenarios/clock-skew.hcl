scenario "clock-skew" {
  description = "the leader's clock jumps 5 minutes back, then another node's 5 minutes ahead: append times stay non-decreasing in every partition and time seeks stay exact (needs a failpoints build)"
  nodes    = 3
  duration = "35s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 3
  }

  fault "back" {
    action    = "failpoint"
    failpoint = "clock-offset"
    value     = "-5m"
    target    = "leader"
    start     = "5s"
    hold      = "8s"
  }

  fault "ahead" {
    action    = "failpoint"
    failpoint = "clock-offset"
    value     = "+5m"
    target    = "random"
    start     = "15s"
    hold      = "8s"
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "9s"
    hold   = "2s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.85 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within = "5s"
  }
}
