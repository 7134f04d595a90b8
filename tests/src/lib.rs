//! Integration-test helpers: locating built binaries and the test runtimes.
