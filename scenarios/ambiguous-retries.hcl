scenario "ambiguous-retries" {
  description = "short pauses of random nodes leave publishes in flight with unknown outcomes; the publishers resend them with the same idempotency keys, and each must be stored once or not at all"
  nodes    = 3
  duration = "40s"
  short    = "25s"

  workload {
    publishers = 4
    rate       = 80
    followers  = true
  }

  fault "pause" {
    action = "pause"
    target = "random"
    start  = "3s"
    hold   = "2500ms"
    every  = "6s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 2.55 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  # TODO(issue 27): the failover target is 1 s; today a paused leader costs
  # the client its 2 s attempt timeout, then an election.
  bounds {
    failover_within = "5s"
  }
}
