//! kreplay-tool: the library injected into GPU applications.
