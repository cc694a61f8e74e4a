//! Placeholder until its issue lands.
#![forbid(unsafe_code)]
