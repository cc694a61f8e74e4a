//! DTLS over tokio UDP sockets.
