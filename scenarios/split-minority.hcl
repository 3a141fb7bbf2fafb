scenario "split-minority" {
  description = "a majority/minority split of 5 nodes: two nodes are cut off from the other three for 8 s, twice; the majority goes on, the minority refuses and catches up"
  nodes    = 5
  duration = "45s"
  short    = "30s"

  topic "chaos" {
    partitions  = 3
    replication = 3
  }

  workload {
    publishers = 3
    rate       = 40
    followers  = true
    replays    = 1
  }

  fault "split" {
    action = "split"
    target = "minority"
    start  = "4s"
    hold   = "8s"
    every  = "15s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 8.21 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s. Today every partition
  # waited for the whole 8 s split in that run, although at most one of the
  # three had two of its replicas on the minority side: to investigate.
  bounds {
    failover_within = "12s"
  }
}
