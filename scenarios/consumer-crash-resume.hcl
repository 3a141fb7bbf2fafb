scenario "consumer-crash-resume" {
  description = "consumers crash and come back: followers drop their streams and resume from their tokens, group members crash without a goodbye and others join, while a random node is killed; every record is seen once by each follower and at least once by the group"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 60
    followers  = true
    group "crashy" {
      members = 3
      churn   = "2s"
    }
  }

  fault "kill" {
    action = "kill"
    target = "random"
    start  = "6s"
    hold   = "3s"
    every  = "13s"
  }
}
