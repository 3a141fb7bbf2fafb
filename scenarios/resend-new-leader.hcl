scenario "resend-new-leader" {
  description = "peer links slowed by 250 ms and the leader of partition 0 paused for 5 s, every 7 s: the old leader's last entries sit on the followers uncommitted when one of them takes over, and the publishers' resends reach the new leader before its first entry commits; each record must be stored once (the new leader cannot see those entries when it checks idempotency keys, only apply can)"
  nodes    = 3
  duration = "30s"
  short    = "16s"

  # Eight publishers a partition, as fast as acknowledgements come: each
  # has its last record in flight when the pause begins, and about half of
  # those are on the followers' logs, not yet applied there.
  workload {
    publishers = 24
    rate       = 0
    followers  = true
    replays    = 1
  }

  # The slow links make the new leader's first commit take two delayed
  # round trips (about 1 s), so the resends, which poll for the new leader
  # every 500 ms at most, arrive while it is leader and has applied nothing
  # of its term. Held past the end of the workload.
  fault "slow-links" {
    action = "delay"
    target = "all"
    value  = "250ms"
    start  = "0s"
    hold   = "10m"
  }

  fault "pause-leader" {
    action = "pause"
    target = "leader"
    start  = "2s"
    hold   = "5s"
    every  = "7s"
  }

  # The longest any partition waited for an acknowledgement in a fault was
  # 6.5 to 8.3 s in the runs of 2026-12-07 (seeds 1 to 3, a busy 2-core
  # machine): a commit takes two delayed round trips here, and the queue
  # behind the pause drains at that pace.
  # TODO(issue 27): the failover target is 1 s. Today a paused leader costs
  # the 2 s client attempt timeout plus an election (1 to 2 s of election
  # timeout, and here four delayed one-way trips of prevote and vote).
  bounds {
    failover_within = "12s"
  }
}
