scenario "bit-flip" {
  description = "a bit flips in a table block written on one node's disk while large records pour in: a checksum catches it when the block is read, no corrupted record is ever served, the node stops and is replaced by a new member (needs a failpoints build)"
  nodes    = 3
  duration = "40s"
  short    = "30s"

  workload {
    publishers  = 3
    rate        = 100
    value_bytes = 16384
    followers   = true
    replays     = 2
  }

  fault "flip" {
    action    = "failpoint"
    failpoint = "bitflip"
    target    = "random"
    start     = "3s"
    hold      = "20s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 0.22 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "2s"
  }
}
