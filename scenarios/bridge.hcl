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
}
