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
}
