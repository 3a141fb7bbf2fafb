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
}
