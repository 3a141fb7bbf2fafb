scenario "bridge" {
  description = "5 nodes in two sides that cannot reach each other and one bridge node that reaches both, the leader of partition 0 on one side"
  nodes    = 5
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 40
    followers  = true
    replays    = 1
  }

  fault "bridge" {
    action = "bridge"
    target = "leader"
    start  = "4s"
    hold   = "10s"
    every  = "15s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 6.07 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today the bridged leader keeps
  # its lease while half the nodes cannot reach it.
  bounds {
    failover_within = "10s"
  }
}
