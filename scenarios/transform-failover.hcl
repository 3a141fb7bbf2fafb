scenario "transform-failover" {
  description = "replays run a transform (built from source: it keeps one publisher's records and appends to their values) while the leader of partition 0 is killed and a node paused: each transformed record must be exactly the transform of the stored one, offsets and order kept"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 60
    replays    = 3
    filter     = "tag-transform"
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "6s"
    hold   = "3s"
    every  = "12s"
  }

  fault "pause" {
    action = "pause"
    target = "random"
    start  = "12s"
    hold   = "2s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.87 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within = "4s"
  }
}
