scenario "filter-failover" {
  description = "replays run the key-prefix filter (built from source, registered as a plugin) while the leader of partition 0 is killed: a filtered replay must equal the filter's predicate over the unfiltered history, offsets and order kept"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 3
    rate       = 60
    replays    = 3
    filter     = "key-prefix"
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "6s"
    hold   = "3s"
    every  = "12s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.69 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a killed leader costs an
  # election: 1 to 2 s of election timeout.
  bounds {
    failover_within = "4s"
  }
}
