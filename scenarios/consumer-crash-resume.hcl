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

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.65 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within = "4s"
  }
}
