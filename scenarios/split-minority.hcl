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

  bounds {
    recover_within = "8s"
  }
}
