scenario "soak" {
  description = "everything at once for a long time (30 min; --duration to change it): kills, pauses, cut links, group churn and resets, replays"
  nodes    = 3
  duration = "30m"
  short    = "60s"

  workload {
    publishers = 3
    rate       = 40
    followers  = true
    replays    = 2
    group "soak" {
      members     = 3
      churn       = "7s"
      reset_every = "23s"
    }
  }

  fault "kill" {
    action = "kill"
    target = "random"
    start  = "10s"
    hold   = "3s"
    every  = "41s"
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "25s"
    hold   = "4s"
    every  = "37s"
  }

  fault "cut" {
    action = "cut"
    target = "leader:1"
    start  = "17s"
    hold   = "5s"
    every  = "29s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.13 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed, paused or cut-
  # off leader costs an election or the 2 s client attempt timeout.
  bounds {
    failover_within = "5s"
  }
}
