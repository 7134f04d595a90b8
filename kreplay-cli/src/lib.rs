//! kreplay-cli: the loader, stream merger and Perfetto writer behind the `kreplay` command.
