scenario "slow-follower" {
  description = "a replica of every partition is down for 15 s while publishers run flat out, then catches up from the leaders"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 4
    followers  = true
    replays    = 1
  }

  fault "down" {
    action = "kill"
    target = "node:3"
    start  = "3s"
    hold   = "15s"
  }
}
