//! Test hosts in network namespaces (client with two interfaces, router, server) for real-socket experiments.
