//! Per-flow fair queuing and hop-by-hop backpressure daemon (NFQUEUE)
