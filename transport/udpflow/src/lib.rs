//! UDP traffic generator and sink with one-way delay, jitter, loss and reordering
