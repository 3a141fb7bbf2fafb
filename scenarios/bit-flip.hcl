scenario "bit-flip" {
  description = "a bit of a stored block flips on one node's disk: a checksum must catch it, so no corrupted record is ever served, and the other replicas hold the truth (needs a failpoints build)"
  nodes    = 3
  duration = "30s"
  short    = "20s"

  workload {
    publishers = 3
    rate       = 60
    followers  = true
    replays    = 2
  }

  fault "flip" {
    action    = "failpoint"
    failpoint = "bitflip"
    target    = "random"
    start     = "6s"
    hold      = "3s"
  }
}
