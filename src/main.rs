//! The native `anygpt-discovery` binary: the same CLI as the npm bin, without Node.

fn main() {
    let args = std::env::args().collect();
    let code = discovery::cli::run_blocking(args, None, discovery::shutdown::os_signal());
    std::process::exit(code);
}
