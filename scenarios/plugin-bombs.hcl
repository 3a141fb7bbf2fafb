scenario "plugin-bombs" {
  description = "replays through filter bombs (an endless loop, unbounded memory, unbounded recursion; built from source) and uploads of table and compile bombs (built by hand) beside 4 ordinary replays and live publishing: each bomb fails, bounded, and nothing else is disturbed"
  nodes    = 3
  duration = "30s"
  short    = "20s"

  workload {
    publishers   = 2
    rate         = 50
    followers    = true
    replays      = 4
    filter_bombs = true
  }

  fault "kill" {
    action = "kill"
    target = "leader"
    start  = "10s"
    hold   = "3s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 1.06 s in the run of 2026-12-07 (--short, seed 1, a busy 2-core machine).
  bounds {
    failover_within = "4s"
  }
}
