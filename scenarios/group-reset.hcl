scenario "group-reset" {
  description = "a live group reset back a few records every 4 s while its members read and commit and a leader is killed: members seek in place and re-read exactly from the target"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 2
    rate       = 50
    group "billing" {
      members     = 2
      reset_every = "4s"
    }
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "8s"
    hold   = "3s"
    every  = "15s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.19 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within = "5s"
  }
}
