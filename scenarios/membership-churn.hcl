scenario "membership-churn" {
  description = "replace members while publishing: a new node joins, a random member's replicas move to it (joint consensus), the member is removed and stopped; twice"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 40
    followers  = true
    replays    = 1
  }

  fault "replace" {
    action = "replace"
    target = "random"
    start  = "5s"
    every  = "18s"
  }
}
