scenario "pause-leader" {
  description = "SIGSTOP the leader of partition 0 for 5 s, every 12 s: a gray failure, alive to the kernel and silent to everyone"
  nodes    = 3
  duration = "45s"
  short    = "30s"

  workload {
    publishers = 3
    rate       = 50
    followers  = true
    replays    = 1
  }

  fault "pause" {
    action = "pause"
    target = "leader"
    start  = "4s"
    hold   = "5s"
    every  = "12s"
  }

  bounds {
    recover_within     = "3s"
    publish_p99_during = "2500ms"
  }
}
