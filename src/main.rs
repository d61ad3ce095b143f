//! The `walissh` binary: everything is in the library (`lib.rs`).

fn main() -> std::process::ExitCode {
    walissh::main()
}
