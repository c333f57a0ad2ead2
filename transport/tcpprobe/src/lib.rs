//! Samples TCP_INFO (cwnd, ssthresh, SRTT, RTO) of sockets in a namespace
