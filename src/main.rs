//! The native `anygpt-discovery` binary: the same CLI as the npm bin, without Node.

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built at startup");
    let args = std::env::args().collect();
    let code = runtime.block_on(discovery::cli::run(args, None, discovery::shutdown::os_signal()));
    // Dropping the runtime could wait on a blocking stdin read; the work is done, so leave now.
    runtime.shutdown_background();
    std::process::exit(code);
}
