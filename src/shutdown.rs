//! Shutdown as an input: the serve loop takes a future, each front end decides what resolves
//! it (signals for the native binary, a call from JS for the Node bin, a channel in tests).

/// Resolves on SIGINT or SIGTERM (Ctrl-C / Ctrl-Break on Windows). On Unix, SIGHUP reloads
/// the config of a gateway serving in this process (`watch::request_reload`, the daemon
/// convention) and otherwise stops like the hangup it is.
pub async fn os_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot install signal handlers; stop with stdin EOF");
            return std::future::pending().await;
        };
        loop {
            tokio::select! {
                _ = term.recv() => return tracing::info!("SIGTERM"),
                _ = int.recv() => return tracing::info!("SIGINT"),
                _ = hup.recv() => if !crate::watch::request_reload() {
                    return tracing::info!("SIGHUP");
                },
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
