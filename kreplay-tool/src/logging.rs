//! The tool's logger: `tracing` to stderr, filtered by `KREPLAY_LOG`.

/// Installs the `KREPLAY_LOG`-filtered stderr logger (once per process), coloured only when
/// stderr is a terminal and `NO_COLOR` is unset, each warning printed once per cause
/// ([`crate::warn_once`]).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let filter = EnvFilter::try_from_env(kreplay_common::replay_config::LOG)
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(kreplay_common::color::stderr_wants_color())
        .with_writer(std::io::stderr)
        .with_filter(crate::warn_once::OncePerCause);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init();
}
