//! Shutdown as an input: the serve loop takes a future, each front end decides what resolves
//! it (signals for the native binary, a call from JS for the Node bin, a channel in tests).

/// Resolves on SIGINT or SIGTERM (Ctrl-C / Ctrl-Break on Windows).
pub async fn os_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            tracing::warn!("cannot install signal handlers; stop with stdin EOF");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
