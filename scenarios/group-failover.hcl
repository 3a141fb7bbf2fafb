scenario "group-failover" {
  description = "a group whose members join, leave or crash every 700 ms and which is reset live every 2 s, while in turn every 6 s the leader of partition 0 is killed or the leader of partition 1 is cut off from the others: resets that fail midway or with an unknown outcome keep the group fenced and read from its targets"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 2
    rate       = 50
    group "storm" {
      members     = 3
      churn       = "700ms"
      reset_every = "2s"
    }
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "3s"
    hold   = "2s"
    every  = "12s"
  }

  fault "isolate" {
    action = "isolate"
    target = "leader:1"
    start  = "9s"
    hold   = "3s"
    every  = "12s"
  }
}
