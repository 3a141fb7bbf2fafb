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
}
