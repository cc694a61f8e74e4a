//! SCTP over UDP encapsulation (RFC 6951) on tokio sockets.
