//! Library target of the BPF crate (empty: the programs are in the `kreplay` binary target).
#![no_std]
