scenario "malformed-gauntlet" {
  description = "malformed requests to every RPC of random nodes (random protobuf bytes, bad JSON, wrong values, truncated and 9 MiB bodies) while publishing and a node is restarted: every answer is a clear client error, nothing panics, no acknowledged record is lost"
  nodes    = 3
  duration = "30s"
  short    = "20s"

  workload {
    publishers = 2
    rate       = 40
    followers  = true
    gauntlet   = true
  }

  fault "restart" {
    action = "restart"
    target = "random"
    start  = "8s"
  }
}
