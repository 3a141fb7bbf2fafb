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
}
