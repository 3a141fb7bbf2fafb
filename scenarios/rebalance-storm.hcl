scenario "rebalance-storm" {
  description = "a subscriber group whose members join, leave or crash every second while publishing: every rebalance fences the old generation"
  nodes    = 3
  duration = "40s"
  short    = "20s"

  workload {
    publishers = 2
    rate       = 50
    replays    = 0
    group "storm" {
      members = 3
      churn   = "1s"
    }
  }
}
