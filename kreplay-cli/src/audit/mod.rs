//! `kreplay audit`'s machinery: reading the in-kernel aggregates, reports (table, JSON) and the
//! Prometheus endpoint.
pub mod maps;
pub mod prometheus;
pub mod render;
pub mod report;
pub mod schedule;
pub mod server;
pub mod session;
