//! The SCTP wire codec (in progress).
